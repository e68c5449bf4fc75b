"""Append finished runs to ``reports/results.jsonl`` and regenerate ``reports/results.md``.

``python -m tagger.results RUN_OR_SWEEP_DIR... [--variant NAME] [--out reports]``

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


def result_line(run: Path, variant: str | None) -> dict[str, Any]:
    m = json.loads((run / "metrics.json").read_text())
    key = m["main_metric"]
    return {
        "task": m["task"], "data": m["data"], "model": m["model"], "head": m.get("head"),
        "variant": variant or "default", "seed": m["seed"],
        "dev": round(m["dev"][key], 2), "test": round(m["test"][key], 2), "metric": key,
        "params": m["params"], "train_seconds": m["train_seconds"], "epochs": m["epochs"],
        "train_tokens_per_s": m.get("train_tokens_per_s"), "command": m["command"], "run_dir": str(run),
    }


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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run dirs or sweep dirs containing run dirs")
    ap.add_argument("--variant", default=None, help="label for these runs (default: 'default')")
    ap.add_argument("--out", default="reports", help="folder of results.jsonl / results.md")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "results.jsonl"
    lines = [json.loads(l) for l in jsonl.read_text().splitlines() if l.strip()] if jsonl.exists() else []
    new = [result_line(r, args.variant) for r in find_runs(args.runs)]
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
