# syntax=docker/dockerfile:1
# The image of the capo-sharednet manager (runtime extension server, admission
# webhook and controllers in one static binary).
#
#   docker build --build-arg GOPROXY=$(go env GOPROXY) -t ghcr.io/capo-sharednet/capo-sharednet:dev .

# Build the manager binary.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
WORKDIR /workspace

# Override with --build-arg GOPROXY=$(go env GOPROXY) to use your own proxy.
ARG GOPROXY=https://proxy.golang.org,direct
ENV GOPROXY=${GOPROXY}

# Download the modules first, so that a source change does not invalidate them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .

# Cross-compile for the platform of the image (docker buildx --platform ...).
ARG TARGETOS=linux
ARG TARGETARCH
# The version the manager reports (make docker-build passes make's VERSION).
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -extldflags=-static -X github.com/capo-sharednet/capo-sharednet/internal/version.Version=${VERSION}" -o /manager .

# A static binary needs no more than distroless/static (CA certificates and a
# non-root user included).
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /manager /manager
# Numeric, so that runAsNonRoot can be verified by the kubelet.
USER 65532:65532
ENTRYPOINT ["/manager"]
