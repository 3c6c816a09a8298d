#!/usr/bin/env bash
# `make test`: everything the tests need, then every test.
# - kube-apiserver and etcd built from source into bin/k8s (once);
# - the OpenStack test bed (hack/openstack-testbed) installed from Debian
#   packages (once, as root) and started when it is not running; a bed this
#   script started is stopped again at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
testbed=hack/openstack-testbed/testbed.sh

assets=$(./hack/ensure-envtest-assets.sh)

# The reset below wipes the cloud: refuse while the demo's plane uses it.
demo_pid=_artifacts/demo/plane.pid
if [ -s "$demo_pid" ] && kill -0 "$(cat "$demo_pid")" 2>/dev/null; then
  echo "make demo is running (pid $(cat "$demo_pid")) and the tests would wipe its cloud: run 'make demo-down' first" >&2
  exit 1
fi

started=""
stop_bed() { if [ -n "$started" ]; then "$testbed" stop || true; fi; }
trap stop_bed EXIT
if ! "$testbed" status >/dev/null 2>&1; then
  started=yes
  "$testbed" install
  "$testbed" start
fi
# This checkout's clouds.yaml (the bed may have been started from another one).
clouds=$("$testbed" clouds)
# A clean cloud for every run (what earlier runs left is wiped); tests create
# uniquely named objects and never reset it themselves.
# (It takes seconds; the bound turns a hang into a clear failure.)
timeout --kill-after=10 600 "$testbed" reset || { echo "the test bed's reset failed or took over 10 minutes" >&2; exit 1; }

export KUBEBUILDER_ASSETS="$assets"
export CAPO_SHAREDNET_TESTBED_CLOUDS="$clouds"
# One package at a time: they share one OpenStack (quotas, usage counts).
# Arguments replace ./... (e.g. `hack/test.sh ./e2e/ -v`). The per-package
# timeout is short enough that a hang fails with its stacks well inside CI's
# 90 minutes instead of eating them; e2e/ needs the most: about 20 minutes
# with the data path (measured 2026-12-07: 1201 s), plus the managers and the
# cloud controller manager built on a cold machine (about 7 minutes).
if [ "$#" -eq 0 ]; then set -- ./...; fi
go test -p 1 -count=1 -timeout 40m "$@"
