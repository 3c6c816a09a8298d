#!/usr/bin/env bash
# Builds the real etcd, kube-apiserver and kube-controller-manager from source through the Go
# module proxy into bin/k8s (setup-envtest downloads are not reachable here), and the OpenStack
# cloud controller manager the plane runs per cluster beside them.
# Idempotent: binaries built from the current hack/tools/k8s/go.mod and go.sum are reused.
# Concurrent runs (the plane's and a test's) wait for each other.
# Prints the assets folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${KUBEBUILDER_ASSETS_DIR:-$root/bin/k8s}
tools=$root/hack/tools/k8s
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

# etcd, kube-apiserver, kube-controller-manager (garbage collection, namespace
# deletion) and the cloud controller manager from one module and one go build:
# their common k8s.io packages compile once, and one link overlaps the next
# compile. No -trimpath, like the product's builds: with the same flags and
# hack/tools/k8s's build list aligned on go.mod's (hack/verify-k8s-build-list.sh),
# the packages the demo tool and the managers compiled are found in the Go
# build cache.
bins=(etcd kube-apiserver kube-controller-manager openstack-cloud-controller-manager)
stamp=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -d' ' -f1)
fresh=yes
for bin in "${bins[@]}"; do [ -x "$out/$bin" ] || fresh=""; done
[ "$(cat "$out/.k8s-stamp" 2>/dev/null)" = "$stamp" ] || fresh=""
if [ -z "$fresh" ]; then
  versions=$(go -C "$tools" list -m -f '{{.Version}}' \
    go.etcd.io/etcd/server/v3 k8s.io/kubernetes k8s.io/cloud-provider-openstack)
  { read -r etcd_version; read -r k8s_version; read -r ccm_version; } <<<"$versions"
  minor=$(echo "$k8s_version" | cut -d. -f2)
  ldflags="-s -w"  # no DWARF: links take less time and memory (the plane is not debugged with dlv)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  ldflags+=" -X k8s.io/cloud-provider-openstack/pkg/version.Version=$ccm_version"
  echo "building etcd $etcd_version, kube-apiserver and kube-controller-manager $k8s_version, openstack-cloud-controller-manager $ccm_version (hack/tools/k8s; 4-10 min cold on 2 cores, by the machine)" >&2
  start=$(date +%s)
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # GOGC=400 unless set: a quarter of the compiler's garbage collections, same
  # cache keys (plane.BuildGOGC says what it saves).
  (cd "$tools" && GOGC=${GOGC:-400} go build -ldflags "$ldflags" -o "$tmp/" "${bins[@]/#/./}")
  for bin in "${bins[@]}"; do mv "$tmp/$bin" "$out/$bin"; done
  echo "$stamp" >"$out/.k8s-stamp"
  echo "built ${bins[*]} in $(( $(date +%s) - start ))s" >&2
fi
echo "$out"
