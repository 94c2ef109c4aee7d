#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on the hand-written C++ sources.
# Generated code under src/protocol/generated/ keeps the generator's own layout.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n "$fmt" ]] || { echo "check-format: clang-format not found (run scripts/install-deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' \
  | grep -v '^src/protocol/generated/' | grep -v '^src/protocol/tests/random_messages.cc$')
[[ ${#files[@]} -gt 0 ]] || exit 0
if [[ "${1:-}" == "--fix" ]]; then
  "$fmt" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: not formatted (run 'make format'):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
