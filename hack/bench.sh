#!/usr/bin/env bash
# `make bench`: the performance figures of docs/performance.md, each against a
# baseline measured in the same run, printed as one table.
# - the hooks (GeneratePatches, ValidateTopology) for 100 and 1,000 nodegroups
#   against a bare JSON decode+encode of the same request (no API server);
# - the Cluster webhook deciding one attach among 500 Clusters x 4 nodegroups
#   against the same decision among 1, with the OpenStack calls it makes;
# - the manager's memory with 500 x 4 objects in its cache against an empty
#   management cluster, then 200 Cluster updates at once against a lone one
#   through the kube-apiserver (test/scale).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=_artifacts/bench
mkdir -p "$out"
assets=$(./hack/ensure-envtest-assets.sh)

: >"$out/bench.txt"
run() { timeout --kill-after=30 1900 "$@" 2>&1 | tee -a "$out/bench.txt"; }
run go test -run '^$' -bench . -benchtime=2s -benchmem -count=1 ./internal/hooks
run go test -run '^$' -bench ClusterAdmissionAtScale -benchtime=200x -benchmem -count=1 ./internal/webhooks
CAPO_SHAREDNET_SCALE=1 KUBEBUILDER_ASSETS="$assets" run go test -count=1 -timeout 30m -run 'TestManagerMemory|TestAdmissionUnderABurst' ./test/scale -v

echo
echo "| benchmark | figures (per op; x-baseline and x-1-cluster are ratios to the baseline of the same run) |"
echo "|---|---|"
awk '/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name); line = ""
  for (i = 3; i + 1 <= NF; i += 2) line = line (line == "" ? "" : ", ") $i " " $(i + 1)
  printf "| %s | %s |\n", name, line
}' "$out/bench.txt"
echo
cat _artifacts/scale/memory.txt
echo
cat _artifacts/scale/burst.txt
