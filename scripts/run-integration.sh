#!/usr/bin/env bash
# Runs the black-box integration tests (tests/integration, pytest) against the Silt broker
# of BUILD_DIR and against the reference Apache Kafka broker (installed first with
# tests/kafka-reference.sh). Exits with pytest's exit code.
#
#   scripts/run-integration.sh BUILD_DIR [PYTEST_ARGS...]
#
# SILT_TEST_WORKERS sets how many pytest processes share the tests (python3-pytest-xdist;
# default: the number of cores; most tests wait on brokers and clients far more than they
# compute); SILT_TEST_BROKERS=silt (or kafka) limits the run to one broker; SILT_TEST_TIMEOUT bounds
# each test (seconds, default 120); SILT_TEST_METADATA=postgresql keeps every Silt broker's
# metadata in PostgreSQL (a throwaway server started for the run, see pg-test-server.sh)
# instead of SQLite; SILT_TEST_OBJECTS=azurite keeps every Silt broker's objects in Azure
# Blob containers of an Azurite server (azurite-test-server.sh) instead of a directory; see
# tests/integration/conftest.py for the others.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 ]] || { echo "usage: $0 BUILD_DIR [PYTEST_ARGS...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift

# The Kafka clients come from Debian (python3-confluent-kafka, python3-kafka): use Debian's
# interpreter even when another python3 (pyenv, venv) comes first on PATH.
py=/usr/bin/python3
[[ -x "$py" ]] || py=$(command -v python3)
if ! "$py" -c 'import pytest, confluent_kafka, kafka' 2>/dev/null; then
  echo "run-integration: $py lacks pytest, confluent_kafka or kafka: run scripts/install-deps.sh" >&2
  exit 2
fi

if [[ ",${SILT_TEST_BROKERS:-silt,kafka}," == *",kafka,"* ]]; then
  "$root/tests/kafka-reference.sh" install
fi

# A hard bound per test (python3-pytest-timeout): a broker that stops answering fails the
# test instead of hanging the run.
timeout_args=()
if "$py" -c 'import pytest_timeout' 2>/dev/null; then
  timeout_args=(--timeout="${SILT_TEST_TIMEOUT:-120}")
fi

worker_args=()
workers=${SILT_TEST_WORKERS:-$(nproc)}
if [[ $workers -gt 1 ]] && "$py" -c 'import xdist' 2>/dev/null; then
  worker_args=(-n "$workers")
fi

if [[ ${SILT_TEST_METADATA:-sqlite} == postgresql ]]; then
  pgdir=$build/pg-server-integration
  trap '"$root/scripts/pg-test-server.sh" stop "$pgdir" >/dev/null 2>&1 || true' EXIT
  eval "$("$root/scripts/pg-test-server.sh" start "$pgdir")"
fi

if [[ ${SILT_TEST_OBJECTS:-file} == azurite ]]; then
  azdir=$build/azurite-server-integration
  trap '"$root/scripts/azurite-test-server.sh" stop "$azdir" >/dev/null 2>&1 || true
        "$root/scripts/pg-test-server.sh" stop "${pgdir:-/nonexistent}" >/dev/null 2>&1 || true' EXIT
  eval "$("$root/scripts/azurite-test-server.sh" start "$azdir")"
  export SILT_TEST_AZURE_ENDPOINT=$SILT_AZURE_ENDPOINT SILT_TEST_AZURE_ACCOUNT=$SILT_AZURE_ACCOUNT
  # The brokers read the key from the environment, not from a URI on their command line.
  export AZURE_STORAGE_KEY=$SILT_AZURE_KEY
fi

cd "$root"
export SILT_BIN="$build/silt"
# The slowest tests are listed at the end, to show where the suite's time goes.
"$py" -m pytest -q -p no:cacheprovider --durations=15 "${timeout_args[@]}" "${worker_args[@]}" tests/integration "$@"
