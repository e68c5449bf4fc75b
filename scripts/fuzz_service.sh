#!/usr/bin/env bash
# Property-based fuzzing of the tagging service from its own OpenAPI document (schemathesis):
# every operation gets schema-derived valid and invalid bodies, under every check (--checks all: no 5xx,
# documented statuses, content types and bodies, valid data accepted, invalid data rejected, 405 for other
# methods); schemathesis.toml lists the statuses the document gives beyond the checks' defaults.
#   scripts/fuzz_service.sh [MAX_EXAMPLES]         (make fuzz; a trained run must exist)
# Against a service that is already running: TAGGER_URL=http://127.0.0.1:3000 scripts/fuzz_service.sh
# One worker thread: CPython 3.11's AST constructor is not thread-safe (python/cpython#106905) and hypothesis
# parses strategy source while describing examples, so two worker threads can fail inside the fuzzer itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
EXAMPLES=${1:-${FUZZ_EXAMPLES:-200}}
mkdir -p reports
FUZZ="$(dirname "$PY")/schemathesis --config-file schemathesis.toml run \$TAGGER_URL/docs.json --checks all --max-examples $EXAMPLES \
  --seed ${FUZZ_SEED:-1} --workers 1 --no-color --request-timeout 60 --generation-database none \
  --report junit --report-junit-path reports/fuzz-junit.xml"
if [ -n "${TAGGER_URL:-}" ]; then
  exec bash -c "$FUZZ"
fi
exec "$PY" scripts/with_service.py --fail-on-5xx ${RUN:+--run "$RUN"} -- "$FUZZ"
