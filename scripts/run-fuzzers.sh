#!/usr/bin/env bash
# Runs each libFuzzer target a fixed number of iterations, seeded with the captured frames and
# the inputs of past crashes (fuzz/regressions).
# Fails on any crash or sanitizer report.
set -euo pipefail
build=${1:-build-asan}
runs=${FUZZ_RUNS:-500000}
cd "$(dirname "$0")/.."
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp tests/data/captures/*/*_request.bin fuzz/regressions/*.bin "$corpus/"
"$build/fuzz/request_fuzzer" -runs="$runs" -seed=1 -max_len=65536 -print_final_stats=1 \
  "$corpus" >"$corpus.log" 2>&1 || { tail -60 "$corpus.log"; rm -f "$corpus.log"; exit 1; }
grep -E '^stat::number_of_executed_units' "$corpus.log" | sed 's/^/request_fuzzer: /'
rm -f "$corpus.log"
