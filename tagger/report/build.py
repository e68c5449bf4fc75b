"""Build a report: find runs -> label variants -> re-evaluate -> sections -> ``report.md``, ``report.html``,
figures and ``best.json``; and the command line of ``python -m tagger.report``."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from tagger.metrics import MAIN_METRIC
from tagger.report import __doc__ as REPORT_DOC
from tagger.report.baselines import baseline_runs, section_baselines
from tagger.report.evaluation import checkpoint_of, evaluate_run
from tagger.report.multitask import note_multitask, select_task
from tagger.report.sections import (Context, _task_of, section_best, section_commands, section_curves,
                                    section_length_unseen, section_main, section_per_label, section_summary)
from tagger.report.studies import section_ablation, section_attention, section_extrapolation
from tagger.report.sweeps import ReportError, Run, find_runs, missing_jobs
from tagger.report.transfer import section_transfer
from tagger.report.variants import assign_variants, best_run, make_groups

DEFAULT_EDGES = (10, 20, 30, 40, 60)  # length buckets 1-10, 11-20, 21-30, 31-40, 41-60, 61-longest


def best_json(best: Run, c: Context) -> dict[str, Any]:
    ckpt = checkpoint_of(best)
    candidates = sum(r.ok and not r.scores_only for r in c.runs)
    return {
        "selected_by": f"dev {c.metric}",
        "reason": f"highest dev {c.metric} ({best.score('dev'):.2f}) among {candidates} completed runs; "
                  "test metrics were not used",
        "run_dir": str(best.path),
        "checkpoint": str(ckpt) if ckpt else best.metrics.get("best_checkpoint"),
        "task": c.task,
        "model": best.metrics.get("model"),
        "head": best.metrics.get("head"),
        "variant": best.variant,
        "seed": best.seed,
        "main_metric": c.metric,
        "dev": best.metrics.get("dev"),
        "test": best.metrics.get("test"),
        "command": best.metrics.get("command"),
        "config": _relative_paths(best.config, Path.cwd()),
    } | ({"task": "multitask", "model_task": best.model_task} if best.model_task else {})  # not a one-task model:
    # find_best (make serve) takes a best.json of task pos or ner for a model of that task alone


def _relative_paths(value: Any, base: Path) -> Any:
    """``value`` (a run's resolved config) with every absolute path relative to ``base``, the folder the report runs
    from: a committed best.json names no folder of the machine that wrote it (run output dirs, the corpus folder)."""
    if isinstance(value, dict):
        return {k: _relative_paths(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative_paths(v, base) for v in value]
    return os.path.relpath(value, base) if isinstance(value, str) and os.path.isabs(value) else value


_OUR_FILES = ("report.md", "report.html", "best.json", "main.png", "per_tag.png", "per_type.png", "length_buckets.png",
              "seen_unseen.png", "learning_curves.png", "ablation.png", "length_extrapolation.png")


def make_report(paths: Sequence[Path], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    runs, sweeps = find_runs(paths)
    if not runs:
        raise ReportError(f"no run dir (metrics.json or .hydra/config.yaml) under {', '.join(map(str, paths))}")
    runs = select_task(runs, args.task)
    task = _task_of(runs)
    missing = missing_jobs(runs, sweeps)
    if args.baseline:
        runs += baseline_runs(args.baseline_results or Path("reports/results.jsonl"), args.baseline, task)
    elif args.baseline_results:
        raise ReportError(f"--baseline-results {args.baseline_results}: name its runs with --baseline 'OVERRIDES'")
    assign_variants(runs)
    groups = make_groups(runs, missing)
    out.mkdir(parents=True, exist_ok=True)
    for p in [*(out / n for n in _OUR_FILES), *out.glob("attention_*.png")]:
        p.unlink(missing_ok=True)  # a figure from an earlier report must not survive as if current

    if not args.no_eval:
        for r in runs:
            if r.ok and not r.scores_only:
                try:
                    r.evaluation = evaluate_run(r, out / "cache", args.threads, args.batch_size, args.data_dir)
                except Exception as e:  # a broken checkpoint or missing corpus is reported, not fatal
                    r.eval_problem = f"{type(e).__name__}: {e}"
    c = Context(runs, groups, sweeps, missing, task, MAIN_METRIC[task], out, args)
    best = best_run(runs)
    section_summary(c, best)
    section_main(c)
    note_multitask(c)
    section_baselines(c)
    section_transfer(c)
    section_per_label(c)
    section_length_unseen(c)
    section_curves(c)
    section_ablation(c)
    section_attention(c)
    section_extrapolation(c)
    section_best(c, best)
    section_commands(c)

    (out / "report.md").write_text(c.doc.markdown(), encoding="utf-8")
    title = c.args.title or f"{task.upper()} comparison"
    (out / "report.html").write_text(c.doc.html(title), encoding="utf-8")
    if best is not None:
        from tagger.fileio import write_json

        write_json(out / "best.json", best_json(best, c))  # what packaging reads: never half-written
    return {"out": str(out), "runs": len(runs), "completed": sum(r.ok for r in runs), "missing": len(missing),
            "best": str(best.path) if best else None, "figures": [p.name for p in c.figures]}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tagger report", description=REPORT_DOC.split("\n\n")[0])
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR", help="run dirs or sweep dirs (searched recursively)")
    p.add_argument("--out", type=Path, required=True, help="output folder, e.g. reports/pos")
    p.add_argument("--no-eval", action="store_true", help="skip checkpoint re-evaluation (speed, length, attention)")
    p.add_argument("--threads", type=int, default=2, help="torch threads for the inference-speed measurement")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--data-dir", default=None, help="where the corpora are, if not where the runs were trained")
    p.add_argument("--edges", type=lambda s: tuple(int(x) for x in s.split(",")), default=DEFAULT_EDGES,
                   help="upper bounds of the length buckets (default 10,20,30,40,60; the last bucket is open)")
    p.add_argument("--attention-layer", type=int, default=-1, help="layer of the heat maps (default: last)")
    p.add_argument("--attention-sentences", type=int, default=3)
    p.add_argument("--title", default=None)
    p.add_argument("--task", default=None, metavar="NAME",
                   help="the task of the multi-task runs the report covers (each counts as a run of that task)")
    p.add_argument("--baseline", action="append", default=[], metavar="'OVERRIDES'",
                   help="the lines of --baseline-results whose command has these overrides (seed aside) are runs "
                        "of the report, scores only (repeatable), e.g. 'experiment=compare_pos model=self_attention'")
    p.add_argument("--baseline-results", type=Path, default=None, metavar="FILE",
                   help="the results.jsonl --baseline reads (default reports/results.jsonl)")
    args = p.parse_args(argv)
    args.command = " ".join(["python -m tagger.report", *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = make_report(args.paths, args.out, args)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
