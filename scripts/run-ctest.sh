#!/usr/bin/env bash
# Runs the tests of the build in $1 with the servers they use started for the run and
# stopped after it: S3 (Ceph radosgw, see s3-test-server.sh), Azure Blob (Azurite, see
# azurite-test-server.sh) and PostgreSQL (the metadata store tests, see pg-test-server.sh).
set -euo pipefail
build=${1:?usage: run-ctest.sh BUILD_DIR}
cd "$(dirname "$0")/.."
root=$(pwd)
s3dir=$root/$build/s3-server
# The trap runs after the cd into the build folder below: absolute paths only.
pgdir=$root/$build/pg-server
azdir=$root/$build/azurite-server
cleanup() {
  "$root/scripts/s3-test-server.sh" stop "$s3dir" >/dev/null 2>&1 || true
  "$root/scripts/azurite-test-server.sh" stop "$azdir" >/dev/null 2>&1 || true
  "$root/scripts/pg-test-server.sh" stop "$pgdir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if env_lines=$("$root/scripts/pg-test-server.sh" start "$pgdir"); then
  eval "$env_lines"
else
  echo "run-ctest: the PostgreSQL test server did not start (log: $pgdir/log)" >&2
  exit 1
fi
if env_lines=$("$root/scripts/s3-test-server.sh" start "$s3dir"); then
  eval "$env_lines"
elif [[ "${SILT_S3_OPTIONAL:-0}" == 1 ]]; then
  echo "run-ctest: the S3 test server did not start (log: $s3dir/log); S3 tests are skipped" >&2
else
  echo "run-ctest: the S3 test server did not start (log: $s3dir/log)" >&2
  exit 1
fi
if env_lines=$("$root/scripts/azurite-test-server.sh" start "$azdir"); then
  eval "$env_lines"
else
  echo "run-ctest: the Azure test server did not start (log: $azdir/log)" >&2
  exit 1
fi
cd "$build"
ctest --output-on-failure -j "$(nproc)"
