#!/usr/bin/env bash
# Fails when hack/tools/k8s (etcd, kube-apiserver, kube-controller-manager, the cloud
# controller manager, kubectl) compiles a module at another version than the
# product module (go.mod) does for the demo tool and the managers. Aligned, the
# packages both compile (client-go, apimachinery, api, grpc, x/net, ...) are
# compiled once and found in the Go build cache by the second build: about a
# third of a cold make demo's compile work (docs/design.md, "make demo on a
# fresh machine"). One stale version makes every package above it compile twice.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/hack/tools/k8s
fmt='{{with .Module}}{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}{{end}}'
product=$(mktemp) plane=$(mktemp)
trap 'rm -f "$product" "$plane"' EXIT
# The product's builds that run before the plane's: the demo tool, the extension and the managers.
(cd "$root" && go list -deps -f "$fmt" ./hack/demo . sigs.k8s.io/cluster-api \
  sigs.k8s.io/cluster-api/bootstrap/kubeadm sigs.k8s.io/cluster-api/controlplane/kubeadm \
  sigs.k8s.io/cluster-api-provider-openstack) | sed '/^$/d' | sort -u >"$product"
(cd "$tools" && go list -deps -f "$fmt" ./etcd ./kube-apiserver ./kube-controller-manager \
  ./openstack-cloud-controller-manager ./kubectl) | sed '/^$/d' | sort -u >"$plane"
stale=$(join "$product" "$plane" | awk '$2 != $3 {printf "\t%s => %s %s\t# hack/tools/k8s has %s\n", $1, $1, $2, $3}')
if [ -n "$stale" ]; then
  echo "hack/tools/k8s/go.mod: these modules differ from go.mod's build list, so their packages compile twice in a cold make demo." >&2
  echo "Set them in its replace block as below (the product's version), then run 'go mod tidy' there:" >&2
  echo "$stale" >&2
  exit 1
fi
echo "hack/tools/k8s shares go.mod's version of all $(join "$product" "$plane" | wc -l) modules both build"
