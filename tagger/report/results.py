"""Append finished runs to ``reports/results.jsonl`` and regenerate ``reports/results.md``.

``python -m tagger.report.results RUN_OR_SWEEP_DIR... [--variant NAME] [--out reports]``

One JSON line per run: task, data, model, variant, seed, dev, test (the task's main metric in
percent), params, train_seconds, epochs, command. A run already in the file (same run_dir) is
replaced, not duplicated. The markdown groups runs by (data, model, variant) with mean ± std.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from tagger.fileio import write_text


def find_runs(paths: list[str]) -> list[Path]:
    runs = []
    for p in map(Path, paths):
        runs += sorted(m.parent for m in ([p / "metrics.json"] if (p / "metrics.json").exists() else p.rglob("metrics.json")))
    return runs


def read_lines(jsonl: Path) -> list[dict[str, Any]]:
    """The lines of a results.jsonl, one dict each."""
    return [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]


def result_lines(run: Path, variant: str | None) -> list[dict[str, Any]]:
    """The lines of one run: one line, or one per task of a multi-task run (its task's kind, corpus and scores, the
    variant naming the multi-task model unless ``variant`` is given)."""
    from tagger.report.multitask import describe, is_multitask, task_side
    from tagger.report.sweeps import load_run

    loaded = load_run(run)
    sides = [(task_side(loaded, n).metrics, variant or describe(loaded)) for n in loaded.metrics["tasks"]] \
        if is_multitask(loaded) else [(loaded.metrics, variant or "default")]
    lines = []
    for m, name in sides:
        key = m["main_metric"]
        lines.append({
            "task": m["task"], "data": m["data"], "model": m["model"], "head": m.get("head"),
            "variant": name, "seed": m["seed"],
            "dev": round(m["dev"][key], 2), "test": round(m["test"][key], 2), "metric": key,
            "params": m["params"], "train_seconds": m["train_seconds"], "epochs": m["epochs"],
            "train_tokens_per_s": m.get("train_tokens_per_s"), "command": m["command"], "run_dir": str(run),
        })
    return lines


def _mean_std(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else f"{xs[0]:.2f}"


def render_markdown(lines: list[dict[str, Any]]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in lines:
        groups.setdefault((r["task"], r["data"], r["model"], r.get("head"), r["variant"]), []).append(r)
    out = ["# Results", "",
           "Every figure below comes from a run listed in `results.jsonl`, made with the command beside it, "
           "on the 2-core CPU machine. dev/test = the task's main metric in percent (POS: token accuracy; "
           "NER: strict IOB2 entity F1, seqeval). Mean ± sample std over seeds; n = number of seeds.", ""]
    for task in sorted({k[0] for k in groups}):
        out += [f"## {task.upper()}", "",
                "| data | model | head | variant | n | dev | test | params | train s/run | command (seed 1 shown) |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for key in sorted(k for k in groups if k[0] == task):
            rs = sorted(groups[key], key=lambda r: r["seed"])
            out.append(
                f"| {key[1]} | {key[2]} | {key[3]} | {key[4]} | {len(rs)} | {_mean_std([r['dev'] for r in rs])} | "
                f"{_mean_std([r['test'] for r in rs])} | {rs[0]['params']:,} | "
                f"{statistics.mean(r['train_seconds'] for r in rs):.0f} | `{rs[0]['command']}` |"
            )
        out.append("")
    return "\n".join(out)


def render_comparison(lines: list[dict[str, Any]], columns: list[tuple[str, list[str]]], title: str) -> str:
    """One table of (task, data, model) rows against ``columns``: (heading, the variants that count as it). A
    variant list lets runs made under another name but with the same configuration share a column. Below each
    task, the mean dev over its corpora per model and column: what defaults are chosen by (test is shown, never
    used to choose)."""
    cells: dict[tuple, dict[str, list[dict]]] = {}
    for r in lines:
        for heading, variants in columns:
            if r["variant"] in variants:
                cells.setdefault((r["task"], r["data"], r["model"]), {}).setdefault(heading, []).append(r)
    heads = [h for h, _ in columns]
    out = [f"# {title}", "",
           "dev / test = the task's main metric in percent (POS: token accuracy; NER: strict IOB2 entity F1), "
           "mean ± sample std over seeds (n seeds); every run is in `reports/results.jsonl` with its command.", "",
           "| task | corpus | encoder | " + " | ".join(f"{h}: dev | {h}: test | n" for h in heads) + " |",
           "|---|---|---|" + "---|---|---|" * len(heads)]
    for key in sorted(cells):
        row = []
        for h in heads:
            rs = cells[key].get(h, [])
            row += [_mean_std([r["dev"] for r in rs]), _mean_std([r["test"] for r in rs]), str(len(rs))] if rs \
                else ["–", "–", "0"]
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(row) + " |")
    out += ["", "Mean dev over the corpora of a task (each corpus's seed mean; a cell only where every corpus has "
            "runs):", "", "| task | encoder | " + " | ".join(f"{h}: mean dev" for h in heads) + " | corpora |",
            "|---|---|" + "---|" * len(heads) + "---|"]
    for task, model in sorted({(k[0], k[2]) for k in cells}):
        corpora = sorted({k[1] for k in cells if k[0] == task})
        row = []
        for h in heads:
            means = [statistics.mean(r["dev"] for r in cells[(task, c, model)][h])
                     for c in corpora if cells.get((task, c, model), {}).get(h)]
            row.append(f"{statistics.mean(means):.2f}" if len(means) == len(corpora) else "–")
        out.append(f"| {task} | {model} | " + " | ".join(row) + f" | {', '.join(corpora)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run dirs or sweep dirs containing run dirs")
    ap.add_argument("--variant", default=None, help="label for these runs (default: 'default')")
    ap.add_argument("--out", default="reports", help="folder of results.jsonl / results.md")
    ap.add_argument("--compare", metavar="FILE.md", help="write a comparison table of results.jsonl (render_comparison)")
    ap.add_argument("--column", action="append", default=[], metavar="HEADING=VARIANT[|VARIANT...]",
                    help="a column of --compare: the variants that count as it")
    ap.add_argument("--title", default="Comparison", help="title of --compare")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "results.jsonl"
    lines = read_lines(jsonl) if jsonl.exists() else []
    if args.compare:
        columns = [(c.partition("=")[0], c.partition("=")[2].split("|")) for c in args.column]
        if not columns or not all(h and v != [""] for h, v in columns):
            raise SystemExit("--compare needs --column HEADING=VARIANT[|VARIANT...] (one or more)")
        write_text(args.compare, render_comparison(lines, columns, args.title))
        print(f"{args.compare}: {len(columns)} column(s) from {jsonl}")
        if not args.runs:
            return
    new = [line for r in find_runs(args.runs) for line in result_lines(r, args.variant)]
    if not new:
        raise SystemExit(f"no finished run (metrics.json) under {args.runs}")
    fresh = {r["run_dir"] for r in new}
    lines = [l for l in lines if l["run_dir"] not in fresh] + new
    markdown = render_markdown(lines)  # rendered before either file is replaced: both change, or neither
    write_text(jsonl, "".join(json.dumps(l) + "\n" for l in lines))
    write_text(out / "results.md", markdown)
    print(f"{len(new)} run(s) -> {jsonl} ({len(lines)} lines), {out / 'results.md'}")


if __name__ == "__main__":
    main()
