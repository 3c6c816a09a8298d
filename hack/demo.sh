#!/usr/bin/env bash
# make demo / make demo-down. What waits on the network and the disk (the
# test bed's apt-get and start) runs in the background from the first second,
# while the demo tool builds; the tool then builds and starts the rest, one
# progress line per step, and waits for each only when it needs it. The
# Kubernetes binaries start building only then: the demo tool has compiled
# most of the packages they share with it (hack/verify-k8s-build-list.sh), and
# two builds of one package at once would both compile it. Every build's and
# apt's output goes to a log under _artifacts/demo, shown whole when that step
# fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmd=${1:-up}
logs=$root/_artifacts/demo
mkdir -p "$logs"
start=$(date +%s)
export CAPO_SHAREDNET_DEMO_START=$start
say() { local s=$(( $(date +%s) - start )); printf '[%02d:%02d] %s\n' $((s / 60)) $((s % 60)) "$*"; }

if [ "$cmd" = up ]; then
  bed=hack/openstack-testbed/testbed.sh
  if "$bed" status >/dev/null 2>&1; then
    : # running: the tool says so
  elif [ -f "$logs/testbed.pid" ] && kill -0 "$(cat "$logs/testbed.pid")" 2>/dev/null; then
    say "OpenStack test bed: still being brought up by an earlier make demo (log _artifacts/demo/testbed.log)"
  else
    say "OpenStack test bed: installing (apt-get, once) and starting in the background; log _artifacts/demo/testbed.log"
    rm -f "$logs/testbed.rc"
    : >"$logs/testbed-started-by-demo"
    # setsid: the test bed outlives this command; the rc file tells the tool how it ended.
    # shellcheck disable=SC2016 # $1 and $2 are the inner shell's arguments
    setsid bash -c '"$1" install && "$1" start; echo $? >"$2.tmp" && mv "$2.tmp" "$2"' _ \
      "$root/$bed" "$logs/testbed.rc" >"$logs/testbed.log" 2>&1 </dev/null &
    echo $! >"$logs/testbed.pid"
  fi
fi

say "demo tool: building (go build ./hack/demo, 3-6 min cold beside the test bed's apt-get); log _artifacts/demo/build.log"
# GOGC=400 unless set, for this build only (plane.BuildGOGC says why).
if ! GOGC=${GOGC:-400} go build -o bin/demo ./hack/demo >"$logs/build.log" 2>&1; then
  cat "$logs/build.log" >&2
  say "demo tool: build failed (above)" >&2
  exit 1
fi
exec bin/demo "$cmd"
