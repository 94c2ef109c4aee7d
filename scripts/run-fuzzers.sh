#!/usr/bin/env bash
# Runs every libFuzzer target, each from its own seed corpus plus the inputs of its past crashes
# (fuzz/regressions), and prints one stats line per target. Fails on any crash or sanitizer
# report; libFuzzer leaves the crashing input as crash-* in the repository's top directory.
#
#   scripts/run-fuzzers.sh [BUILD_DIR] [TARGET...]    (defaults: build-asan, every target)
#
# By default each target runs a fixed number of inputs, about 10 s each on two cores and
# request_fuzzer about 90 s (about 3 minutes in all):
#   FUZZ_RUNS               request_fuzzer       (default 500000)
#   FUZZ_RUNS_BATCH         batch_fuzzer         (default 200000)
#   FUZZ_RUNS_WAL           wal_fuzzer           (default 60000)
#   FUZZ_RUNS_OBJECT        object_fuzzer        (default 10000)
#   FUZZ_RUNS_OBJECT_WAL    object_wal_fuzzer    (default 200000)
#   FUZZ_RUNS_XML           xml_fuzzer           (default 50000)
#   FUZZ_RUNS_SASL          sasl_fuzzer          (default 3000: each input may sign and verify)
# FUZZ_SECONDS=N runs each target for N seconds instead, whatever the counts (a long run).
#
# Seeds: request_fuzzer takes the captured request frames (tests/data/captures) and
# fuzz/regressions/*.bin; every other target X takes fuzz/seeds/X/ (written by
# fuzz/make_seeds.py) and fuzz/regressions/X/.
set -euo pipefail
build=${1:-build-asan}
shift || true
cd "$(dirname "$0")/.."

all_targets=(request_fuzzer batch_fuzzer wal_fuzzer object_fuzzer object_wal_fuzzer xml_fuzzer
             sasl_fuzzer)
targets=("$@")
if [[ $# -eq 0 ]]; then targets=("${all_targets[@]}"); fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shopt -s nullglob

# The fixed number of runs of a target, and the largest input it is given.
runs_of() {
  case $1 in
    request_fuzzer) echo "${FUZZ_RUNS:-500000}" ;;
    batch_fuzzer) echo "${FUZZ_RUNS_BATCH:-200000}" ;;
    wal_fuzzer) echo "${FUZZ_RUNS_WAL:-60000}" ;;
    object_fuzzer) echo "${FUZZ_RUNS_OBJECT:-10000}" ;;
    object_wal_fuzzer) echo "${FUZZ_RUNS_OBJECT_WAL:-200000}" ;;
    xml_fuzzer) echo "${FUZZ_RUNS_XML:-50000}" ;;
    sasl_fuzzer) echo "${FUZZ_RUNS_SASL:-3000}" ;;
    *) echo "unknown fuzz target: $1" >&2; return 1 ;;
  esac
}
max_len_of() {
  case $1 in
    request_fuzzer | batch_fuzzer | wal_fuzzer) echo 65536 ;;
    *) echo 16384 ;;
  esac
}

for target in "${targets[@]}"; do
  runs=$(runs_of "$target")
  corpus="$work/$target"
  mkdir -p "$corpus"
  if [[ $target == request_fuzzer ]]; then
    seeds=(tests/data/captures/*/*_request.bin fuzz/regressions/*.bin)
  else
    seeds=("fuzz/seeds/$target"/* "fuzz/regressions/$target"/*)
  fi
  if [[ ${#seeds[@]} -gt 0 ]]; then cp "${seeds[@]}" "$corpus/"; fi
  if [[ -n ${FUZZ_SECONDS:-} ]]; then
    limit=(-max_total_time="$FUZZ_SECONDS")
  else
    limit=(-runs="$runs")
  fi
  log="$work/$target.log"
  start=$SECONDS
  "$build/fuzz/$target" "${limit[@]}" -seed=1 -max_len="$(max_len_of "$target")" \
    -print_final_stats=1 "$corpus" >"$log" 2>&1 || {
    echo "$target failed:" >&2
    tail -60 "$log" >&2
    exit 1
  }
  grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/$target: /; s/\$/ ($((SECONDS - start)) s)/"
done
