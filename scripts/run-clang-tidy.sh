#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) on the hand-written C++ sources of the build in $1.
# Generated code is left out: the generator's output is checked by its tests instead.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[[ -n "$tidy" ]] || { echo "run-clang-tidy: clang-tidy not found (run scripts/install-deps.sh)" >&2; exit 1; }
[[ -f "$build/compile_commands.json" ]] || { echo "run-clang-tidy: no $build/compile_commands.json" >&2; exit 1; }
# Hand-written sources that this build compiles (the fuzz targets only exist in clang builds).
mapfile -t files < <(python3 - "$build/compile_commands.json" <<'PY'
import json, os, sys
root = os.getcwd()
seen = sorted({os.path.relpath(e["file"], root) for e in json.load(open(sys.argv[1]))})
for f in seen:
    if not f.startswith("src/protocol/generated/") and not f.endswith("random_messages.cc"):
        print(f)
PY
)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
    >"$log" 2>&1; then
  grep -E 'error:|warning:' -A3 "$log" | head -80
  echo "run-clang-tidy: findings above" >&2
  exit 1
fi
echo "run-clang-tidy: ${#files[@]} files clean"
