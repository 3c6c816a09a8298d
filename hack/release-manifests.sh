#!/usr/bin/env bash
# `make release-manifests`: the assets of one capo-sharednet release, as
# clusterctl reads them from a provider repository (GitHub release or a local
# file:// repository):
#
#   <out>/runtime-extension-components.yaml   config/default, image tag = <version>
#   <out>/metadata.yaml                        release series -> CAPI contract
#   <out>/clusterclass-shared-network.yaml     templates/, unchanged
#   <out>/cluster-template-shared-network.yaml (with the cloud controller manager's ClusterResourceSet)
#
# The two templates are CAPO flavor files: clusterctl reads
# cluster-template-<flavor>.yaml and clusterclass-<class>.yaml from the
# infrastructure provider's repository, here from its overrides folder
# (docs/templates.md), or the template alone with --from <release URL>.
#
# Usage: hack/release-manifests.sh <version> [<out dir>]   (default _artifacts/release)
# The version must be semver (vX.Y.Z...) and its X.Y must be a release series of
# metadata.yaml: clusterctl refuses a version no series covers.
# KUSTOMIZE may name a kustomize v5 binary; otherwise bin/tools/kustomize-v5.7.0
# is installed once with `go install` (as the Makefile does).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

version=${1:?usage: hack/release-manifests.sh <version> [<out dir>]}
out=$(abs "${2:-$root/_artifacts/release}")
image=${IMAGE_NAME:-ghcr.io/capo-sharednet/capo-sharednet}
kustomize_version=v5.7.0
kustomize=$(abs "${KUSTOMIZE:-$root/bin/tools/kustomize-$kustomize_version}")
cd "$root"

if [[ ! $version =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release-manifests: version $version is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
# metadata.yaml lists "- major: X" followed by "  minor: Y" for each series.
if ! awk -v M="$major" -v m="$minor" '
    /^- major:/ { cur = $3 }
    /^  minor:/ { if (cur == M && $2 == m) found = 1 }
    END { exit found ? 0 : 1 }' metadata.yaml; then
  echo "release-manifests: metadata.yaml has no release series $major.$minor for $version; add one (with its contract) first" >&2
  exit 1
fi

if [ ! -x "$kustomize" ]; then
  echo "installing kustomize $kustomize_version into $(dirname "$kustomize")" >&2
  tmp_bin=$(mktemp -d)
  GOBIN=$tmp_bin go install "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version"
  mkdir -p "$(dirname "$kustomize")"
  mv "$tmp_bin/kustomize" "$kustomize"
  rmdir "$tmp_bin"
fi

# Build from a copy of config/ so that setting the image tag leaves the tree as it is.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r config "$work/config"
(cd "$work/config/manager" && "$kustomize" edit set image "controller=$image:$version")

mkdir -p "$out"
"$kustomize" build "$work/config/default" > "$out/runtime-extension-components.yaml"
cp metadata.yaml "$out/metadata.yaml"
cp templates/clusterclass-*.yaml templates/cluster-template-*.yaml "$out/"
echo "$out"
