#!/usr/bin/env bash
# Serving examples, run for real: package the best POS and NER models (reports/*/best.json) and a
# self-attention POS run into a private BentoML store, serve them on 3000/3001/3002, run each request
# of docs/reference.md and print the transcript (tests/serve/test_readme_serve.py runs the README's own).
#   PY=.venv/bin/python scripts/readme_examples.sh [SA_RUN_DIR] > /tmp/examples.md
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BENTOML=$(dirname "$PY")/bentoml
SA_RUN=${1:-}  # a self-attention run dir for /attention and the /ui screenshot
export BENTOML_HOME=${BENTOML_HOME:-$(mktemp -d)}
export BENTOML_DO_NOT_TRACK=True
pids=()
trap 'for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT

$PY -m tagger.commands.package "${POS_SRC:-reports/pos/best.json}" --name tagger >&2
$PY -m tagger.commands.package "${NER_SRC:-reports/ner/best.json}" --name tagger-ner >&2
[ -n "$SA_RUN" ] && $PY -m tagger.commands.package "$SA_RUN" --name tagger-sa >&2
serve() {  # name port
  TAGGER_MODEL="$1:latest" setsid "$BENTOML" serve serve.service:TaggingService --host 127.0.0.1 --port "$2" >"$BENTOML_HOME/$1.log" 2>&1 &
  pids+=($!)
}
serve tagger 3000; serve tagger-ner 3001; [ -n "$SA_RUN" ] && serve tagger-sa 3002
for port in 3000 3001 ${SA_RUN:+3002}; do
  for _ in $(seq 120); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 1; done
done

run() {  # print the command as typed, then its output
  echo "\$ $1"
  bash -c "$1"
  echo
}
echo '```console'
run "curl -s localhost:3000/tag -H 'content-type: application/json' -d '{\"texts\": [\"I don'\\''t like green eggs.\"]}'"
run "curl -s localhost:3000/tag -H 'content-type: application/json' -d '{\"sentences\": [[\"The\", \"cat\", \"sat\", \".\"]]}'"
run "curl -s localhost:3001/entities -H 'content-type: application/json' -d '{\"texts\": [\"Angela Merkel met Emmanuel Macron in Paris on Monday.\"]}'"
run "curl -s localhost:3001/tag -H 'content-type: application/json' -d '{\"texts\": [\"Angela Merkel met Emmanuel Macron in Paris on Monday.\"]}' | jq -c '.results[0].tokens[] | [.text, .tag, (.score*1000|round/1000)]'"
[ -n "$SA_RUN" ] && run "curl -s localhost:3002/attention -H 'content-type: application/json' -d '{\"text\": \"The cat sat.\"}' | jq -c '{model, tokens: [.tokens[].text], layers, heads, first_layer_first_head: .weights[0][0]}'"
run "curl -s localhost:3001/attention -H 'content-type: application/json' -d '{\"text\": \"The cat sat.\"}' -w '\nHTTP %{http_code}\n'"
run "curl -s localhost:3000/model | jq -c '{name, task, labels, dev: .metrics.dev.acc, test: .metrics.test.acc, supports_attention, window, encoder: .config.model._target_, run: .provenance.run_dir}'"
run "python3 -c 'print(\"{\\\"texts\\\": [\\\"\" + \"the cat sat . \" * 750 + \"\\\"]}\")' | curl -s localhost:3000/tag -H 'content-type: application/json' --data-binary @- | jq '.results[0].tokens | length'"
echo '```'
echo
echo 'Bad requests (same server):'
echo
echo '```console'
run "curl -s localhost:3000/tag -H 'content-type: application/json' -d '{\"texts\": [\"ok\"], \"lang\": \"en\"}' -w '\nHTTP %{http_code}\n'"
run "curl -s localhost:3000/tag -H 'content-type: application/json' -d '{\"sentences\": \"The cat\"}' -w '\nHTTP %{http_code}\n'"
run "curl -s localhost:3000/tag -H 'content-type: application/json' -d '{\"texts\": []}' -w '\nHTTP %{http_code}\n'"
run "python3 -c 'print(\"{\\\"texts\\\": [\\\"\" + \"word \" * 5001 + \"\\\"]}\")' | curl -s localhost:3000/tag -H 'content-type: application/json' --data-binary @- -w '\nHTTP %{http_code}\n'"
run "head -c 1200000 /dev/zero | tr '\\0' x | curl -s localhost:3000/tag -H 'content-type: application/json' --data-binary @- -w '\nHTTP %{http_code}\n'"
run "printf '{\"texts\": [\"caf\\xe9\"]}' | curl -s localhost:3000/tag -H 'content-type: application/json' --data-binary @- -w '\nHTTP %{http_code}\n'"
run "curl -s localhost:3000/tag -d '{\"texts\": [\"x\"]}' -w '\nHTTP %{http_code}\n'"
run "curl -s localhost:3000/livez -w 'HTTP %{http_code}\n'"
echo '```'
if [ -n "$SA_RUN" ] && command -v chromium >/dev/null; then
  profile=$(mktemp -d)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$profile" --window-size=1200,900 \
    --virtual-time-budget=10000 --screenshot=docs/ui.png \
    "http://127.0.0.1:3002/ui?text=I%20saw%20her%20duck%20with%20a%20telescope%20in%20New%20York.&autorun=1&token=3" >&2 2>/dev/null
  echo "screenshot: docs/ui.png" >&2
fi
