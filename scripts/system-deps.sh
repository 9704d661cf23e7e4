#!/usr/bin/env bash
# The system programs the test suite needs beyond Python: Debian's PostgreSQL (the tests start a
# throw-away server on a loopback port) and Debian's chromium (optuna-dashboard seen in a real
# browser). Installed when missing and this runs as root with apt-get; otherwise one line says what
# to run, and the suite does not start. `make test` and `.ci/run` both call this script.
set -euo pipefail

missing=()
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
if ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "the tests need ${missing[*]}: run 'sudo apt-get update && sudo apt-get install -y ${missing[*]}' (Debian/Ubuntu), then make test again" >&2
  exit 2
fi
echo "installing Debian's ${missing[*]} for the PostgreSQL and browser tests"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
