#!/usr/bin/env bash
# Builds the real kube-apiserver, kube-controller-manager and etcd from source through the Go module
# proxy into bin/k8s (setup-envtest downloads are not reachable here).
# Idempotent: a binary that exists is reused. Prints the assets folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${KUBEBUILDER_ASSETS_DIR:-$root/bin/k8s}
k8s_version=v1.34.4
mkdir -p "$out"

if [ ! -x "$out/etcd" ]; then
  echo "building etcd from go.etcd.io/etcd/server/v3 (about 30s)" >&2
  (cd "$root/hack/tools/etcd" && go build -trimpath -o "$out/etcd.tmp" . && mv "$out/etcd.tmp" "$out/etcd")
fi

# kube-apiserver, and kube-controller-manager for the local plane (garbage
# collection, namespace deletion), from the same k8s.io/kubernetes version.
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-s -w"  # no DWARF: links take less time and memory (the plane is not debugged with dlv)
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
for bin in kube-apiserver kube-controller-manager; do
  if [ ! -x "$out/$bin" ]; then
    echo "building $bin $k8s_version from k8s.io/kubernetes (about 4 min cold, 2 min after the other)" >&2
    start=$(date +%s)
    (cd "$root/hack/tools/$bin" && go build -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" . && mv "$out/$bin.tmp" "$out/$bin")
    echo "built $bin in $(( $(date +%s) - start ))s" >&2
  fi
done
echo "$out"
