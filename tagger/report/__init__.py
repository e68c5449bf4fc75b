"""Comparison reports: ``python -m tagger.report RUN_DIR... --out reports/NAME``.

Reads the run dirs written by ``tagger.train`` (or sweep dirs, searched recursively), groups the
runs into variants (model name + the config values that differ between runs of that model),
aggregates seeds (mean ± sample std), re-evaluates every best checkpoint once on the test split
(inference speed, accuracy by sentence length, seen vs unseen words, attention maps, length
extrapolation) and writes ``report.md``, a self-contained ``report.html``, the PNG figures and
``best.json`` (the best run by the *dev* metric, for packaging).

Nothing is dropped silently: a run dir without ``metrics.json`` (failed, killed or still running)
and a sweep job that never started are listed in the report with their overrides.

Reads straight down, one module per step: find runs and sweeps (:mod:`.sweeps`; a multi-task run as a run of the
``--task`` chosen, :mod:`.multitask`; lines of results.jsonl as runs, scores only, :mod:`.baselines`) -> label
variants and group seeds (:mod:`.variants`) -> re-evaluate the checkpoints (:mod:`.evaluation`, through
:func:`tagger.inference.scoring.score_split`) -> build the sections (:mod:`.sections`, :mod:`.studies`, figures
from :mod:`.plots`, numbers from :mod:`.stats`) -> render Markdown and HTML (:mod:`.document`) -> write
(:mod:`.build`, which holds the command line).
"""
