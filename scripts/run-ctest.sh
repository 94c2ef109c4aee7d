#!/usr/bin/env bash
# Runs the tests of the build in $1 with the S3 server they use (Ceph radosgw, see
# s3-test-server.sh) started for the run and stopped after it.
set -euo pipefail
build=${1:?usage: run-ctest.sh BUILD_DIR}
cd "$(dirname "$0")/.."
root=$(pwd)
s3dir=$root/$build/s3-server
# The trap runs after the cd into the build folder below: absolute paths only.
cleanup() { "$root/scripts/s3-test-server.sh" stop "$s3dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
if env_lines=$("$root/scripts/s3-test-server.sh" start "$s3dir"); then
  eval "$env_lines"
elif [[ "${SILT_S3_OPTIONAL:-0}" == 1 ]]; then
  echo "run-ctest: the S3 test server did not start (log: $s3dir/log); S3 tests are skipped" >&2
else
  echo "run-ctest: the S3 test server did not start (log: $s3dir/log)" >&2
  exit 1
fi
cd "$build"
ctest --output-on-failure -j "$(nproc)"
