#!/usr/bin/env bash
# Regenerates the protocol code into a scratch directory and fails if it differs from the
# committed code. Skipped (with a note) when the Kafka specs directory is absent.
set -euo pipefail
specs=${1:-../shared/kafka-protocol}
cd "$(dirname "$0")/.."
if [[ ! -d "$specs/message" ]]; then
  echo "check-generated: $specs/message not found; skipping the generated-code check"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/kafka_codegen.py --specs "$specs/message" --out "$tmp/generated" \
  --test-out "$tmp/tests" >/dev/null
status=0
diff -r "$tmp/generated" src/protocol/generated >"$tmp/diff" || status=1
diff "$tmp/tests/random_messages.cc" src/protocol/tests/random_messages.cc >>"$tmp/diff" || status=1
if [[ $status -ne 0 ]]; then
  head -50 "$tmp/diff"
  echo "check-generated: the committed generated code differs from what $specs gives;" \
       "run 'make generate' and commit the result" >&2
  exit 1
fi
echo "check-generated: generated code matches $specs"
