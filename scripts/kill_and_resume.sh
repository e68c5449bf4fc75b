#!/usr/bin/env bash
# SIGKILL a real EWT training mid-epoch, resume it from last.ckpt, compare with an uninterrupted run
# (same epochs and steps; dev/test accuracy within TOLERANCE points). Writes reports/kill_resume.json.
#   scripts/kill_and_resume.sh [extra tagger.train overrides]      (make kill-resume)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-$(mktemp -d -t tagger-kill-resume-XXXX)}
mkdir -p reports
status=0
"$PY" scripts/kill_and_resume.py --out "$OUT" --tolerance "${TOLERANCE:-1.0}" -- \
  data=ud_ewt model=window_fc trainer.max_epochs=3 +trainer.limit_train_batches=150 threads=1 \
  '~callbacks.progress_bar' +trainer.enable_progress_bar=false "$@" || status=$?
cp "$OUT/kill_resume.json" reports/kill_resume.json
exit $status
