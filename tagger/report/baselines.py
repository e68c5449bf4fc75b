"""Lines of ``reports/results.jsonl`` as runs of a report: the runs a report compares with when their run dirs are
not on this machine (``--baseline-results FILE --baseline 'OVERRIDES'``). Scores only: the dev and test main metric,
params, epochs and training speed as the line has them; no per-tag scores, no checkpoint to re-evaluate, never the
best model of best.json. Each ``--baseline`` is a variant named by its overrides, beside which the section below the
main table gives every other variant's difference."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Sequence

from tagger.report.results import read_lines
from tagger.report.sections import METRIC_TEXT, Context
from tagger.report.stats import fmt, mean_std
from tagger.report.sweeps import ReportError, Run, _identity


def command_overrides(command: str) -> list[str]:
    """The overrides of a ``python -m tagger.train [-m] OVERRIDE...`` command line."""
    words = shlex.split(command)
    if "tagger.train" in words:
        words = words[words.index("tagger.train") + 1:]
    return [w for w in words if not w.startswith("-")]


def _run(line: dict[str, Any], spec: str) -> Run:
    metric = line["metric"]
    metrics = {"task": line["task"], "data": line["data"], "model": line["model"], "head": line.get("head"),
               "seed": line["seed"], "main_metric": metric,
               "dev": {metric: line["dev"]}, "test": {metric: line["test"]},
               "params": line.get("params"), "epochs": line.get("epochs"),
               "train_tokens_per_s": line.get("train_tokens_per_s"), "command": line["command"], "config": {}}
    return Run(Path(line["run_dir"]), metrics, command_overrides(line["command"]), label=spec, scores_only=True)


def baseline_runs(jsonl: Path, specs: Sequence[str], task: str) -> list[Run]:
    """The ``task`` lines of ``jsonl`` whose command has every override of a spec (seed aside), one run each.
    ReportError naming --baseline when a spec matches no line, lines of different commands (name more overrides),
    or two lines of one seed."""
    if not jsonl.is_file():
        raise ReportError(f"--baseline-results {jsonl}: no such file")
    lines = [line for line in read_lines(jsonl) if line.get("task") == task]
    runs = []
    for spec in specs:
        want = _identity(shlex.split(spec))
        matched = [line for line in lines if want <= _identity(command_overrides(line["command"]))]
        if not matched:
            raise ReportError(f"--baseline {spec!r}: no {task} line of {jsonl} has these overrides in its command")
        commands = {" ".join(sorted(_identity(command_overrides(line["command"])) - want)) for line in matched}
        if len(commands) > 1:
            raise ReportError(f"--baseline {spec!r}: lines of different commands in {jsonl} have these overrides "
                              f"(besides them: {'; '.join(sorted(c or '(nothing)' for c in commands))}); "
                              "add the overrides of one")
        seeds: dict[Any, list[str]] = {}
        for line in matched:
            seeds.setdefault(line["seed"], []).append(line["run_dir"])
        if twice := {s: dirs for s, dirs in seeds.items() if len(dirs) > 1}:
            raise ReportError(f"--baseline {spec!r}: {jsonl} has several lines of one seed ("
                              + "; ".join(f"seed {s}: {', '.join(dirs)}" for s, dirs in twice.items()) + ")")
        runs += [_run(line, spec) for line in matched]
    return runs


def section_baselines(c: Context) -> None:
    """Below the main table, where there are baselines: each variant's difference from each (mean dev and test)."""
    d, m = c.doc, c.metric
    baselines = [g for g in c.done if g.runs[0].scores_only]
    if not baselines:
        return
    d.p(f"Baselines ({', '.join(f'`{g.variant}`' for g in baselines)}): lines of results.jsonl "
        "(--baseline-results, --baseline), scores only — no per-tag scores, no re-evaluation, never the best model.")
    stats = {g.variant: [mean_std(r.score(k) for r in g.runs) for k in ("dev", "test")] for g in c.done}

    def delta(a: str, b: str, i: int) -> str:
        x, y = stats[a][i][0], stats[b][i][0]
        return "–" if a == b or x is None or y is None else f"{x - y:+.2f}"

    header = ["variant", "n", f"dev {m}", f"test {m}"]
    for b in baselines:
        header += [f"Δ dev vs `{b.variant}`", f"Δ test vs `{b.variant}`"]
    rows = [[f"`{g.variant}`", len(g.runs), fmt(stats[g.variant][0]), fmt(stats[g.variant][1])]
            + [delta(g.variant, b.variant, i) for b in baselines for i in (0, 1)] for g in c.done]
    d.table(header, rows, f"Dev and test {METRIC_TEXT[m]}, mean ± std over n seeds, and the difference of the means "
                          "from each baseline's. A difference smaller than the stds is not evidence either way; test "
                          "is shown, never used to choose.")
