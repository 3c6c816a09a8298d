#!/usr/bin/env bash
# Prints the path of shellcheck, installing the Debian package first when it
# is missing (as root; `make lint` runs this).
set -euo pipefail
if ! command -v shellcheck >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "shellcheck is missing: install it (apt-get install shellcheck) or run make lint as root" >&2
    exit 1
  fi
  (
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get update -qq
    timeout 600 apt-get install -y -q --no-install-recommends shellcheck
  ) >&2
fi
command -v shellcheck
