#!/usr/bin/env bash
# `make bench-scale`: how the cost grows, the curve of docs/performance.md.
# At each size of CAPO_SHAREDNET_SCALE_CLUSTERS (100,500,1000,2000 Clusters of
# 4 nodegroups by default): the manager's peak RSS and live heap with the
# objects in its cache (test/scale, one API server, the objects written up to
# each size in turn), the objects it rewrote in steady state, the OpenStack
# requests of its first look at every attachment, and the Cluster webhook's
# decision against the 1-Cluster one; GeneratePatches at 1,000 nodegroups.
# hack/benchplot then writes the table into docs/performance.md and the plot
# into docs/performance-scale.svg. About 25 minutes on 2 cores at the
# default sizes, most of it writing 42,000 objects.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=_artifacts/bench
mkdir -p "$out"
assets=$(./hack/ensure-envtest-assets.sh)
export CAPO_SHAREDNET_SCALE_CLUSTERS=${CAPO_SHAREDNET_SCALE_CLUSTERS:-100,500,1000,2000}

: >"$out/curve.txt"
run() { timeout --kill-after=30 "$1" "${@:2}" 2>&1 | tee -a "$out/curve.txt"; }
run 1200 go test -run '^$' -bench 'ClusterAdmissionCurve' -benchtime=2000x -benchmem -count=5 ./internal/webhooks
run 600 go test -run '^$' -bench 'GeneratePatches/nodegroups=1000' -benchtime=2s -count=3 ./internal/hooks
CAPO_SHAREDNET_SCALE=1 KUBEBUILDER_ASSETS="$assets" run 4200 go test -count=1 -timeout 65m -run TestManagerMemoryAtScale ./test/scale -v
go run ./hack/benchplot -memory _artifacts/scale/memory.json -bench "$out/curve.txt" \
  -svg docs/performance-scale.svg -doc docs/performance.md -date "$(date -u +%F)"
echo
cat _artifacts/scale/memory.txt
echo "docs/performance.md and docs/performance-scale.svg rewritten from this run"
