"""Two checkouts of the project timed against each other, taking turns: ``python -m bench.ab OLD NEW MODE ...``.

A change that should not cost speed (a refactor, a dependency bump) or should buy it is judged by a ratio measured
in one run on one machine, never by figures from two runs: other load and the CPU's clock drift between runs. Each
round runs one fresh process per checkout (``PYTHONPATH`` set to the checkout, so each imports its own ``tagger``),
A then B in odd rounds and B then A in even ones, and the result is the median of each side and their ratio.

Modes:

- ``tag RUN``: tokens/s of ``tagger.load(RUN, backend=..., threads=...).tag(sentences)`` over the EWT test
  sentences (gold tokens; two untimed passes, then ``--repeats`` timed ones per process), the public API both
  checkouts share. The default backend is the service's (:data:`tagger.inference.backends.DEFAULT_BACKEND`).
- ``train OVERRIDES...``: the ``fit_seconds`` and ``train_tokens_per_s`` that ``python -m tagger.train OVERRIDES``
  writes to ``metrics.json`` (one training per process, in a temporary run dir).

Prints a table and writes ``--out`` (JSON) with the CPU model, the two commits, every sample and the command.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# what a checkout's process runs in tag mode: only the public API, so old and new code run the same lines
TAG_CHILD = """
import gc, json, sys, time
import tagger
run, backend, threads, repeats, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sentences = json.load(open(path, encoding="utf-8"))
nlp = tagger.load(run, threads=threads, backend=backend)
nlp.tag(sentences); nlp.tag(sentences)
gc.freeze()
seconds = []
for _ in range(repeats):
    started = time.perf_counter()
    nlp.tag(sentences)
    seconds.append(time.perf_counter() - started)
print(json.dumps(seconds))
"""


def commit(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def child_env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout.resolve())}


def tag_sample(checkout: Path, args, sentences_path: Path, tokens: int) -> dict[str, Any]:
    run = Path(args.target[0])  # a path is read from the checkout's folder: made absolute; a store tag stays
    run = str(run.resolve()) if run.exists() else args.target[0]
    out = subprocess.run([sys.executable, "-c", TAG_CHILD, run, args.backend, str(args.threads),
                          str(args.repeats), str(sentences_path)], cwd=checkout, env=child_env(checkout),
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{checkout}: the tagging process failed:\n{out.stderr[-3000:]}")
    seconds = json.loads(out.stdout.strip().splitlines()[-1])
    return {"tokens_per_s": round(tokens / statistics.median(seconds)), "pass_seconds": seconds}


def train_sample(checkout: Path, args, run_dir: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tagger.train", *args.target, f"hydra.run.dir={run_dir}"]
    out = subprocess.run(cmd, cwd=checkout, env=child_env(checkout), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{checkout}: the training failed:\n{out.stderr[-3000:]}")
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    return {key: metrics.get(key) for key in ("fit_seconds", "train_tokens_per_s", "dev", "epochs")
            if key in metrics}


def main(argv: list[str] | None = None) -> int:
    from bench.backends import cpu
    from bench.loadgen import ewt_split
    from tagger.inference.backends import DEFAULT_BACKEND

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="the first checkout (e.g. a git worktree of the old commit)")
    parser.add_argument("b", type=Path, help="the second checkout")
    parser.add_argument("mode", choices=("tag", "train"))
    parser.add_argument("target", nargs="+", help="tag: the model (run dir, best.json, .ckpt or store tag); "
                                                  "train: the tagger.train overrides")
    parser.add_argument("--rounds", type=int, default=6, help="processes per checkout, taking turns")
    parser.add_argument("--repeats", type=int, default=3, help="tag: timed passes per process")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backend", default=DEFAULT_BACKEND)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TAGGER_DATA_DIR", "data")))
    parser.add_argument("--out", type=Path, help="write the samples and medians here (JSON)")
    parser.add_argument("--note", help="a line about the conditions (e.g. what else ran)")
    args = parser.parse_args(argv)
    checkouts = {"a": args.a, "b": args.b}
    key = "tokens_per_s" if args.mode == "tag" else "fit_seconds"
    samples: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode == "tag":
            sentences = ewt_split(args.data_dir, "test")[0]
            tokens = sum(map(len, sentences))
            sentences_path = Path(tmp) / "sentences.json"
            sentences_path.write_text(json.dumps(sentences), encoding="utf-8")
        for r in range(args.rounds):
            for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
                if args.mode == "tag":
                    sample = tag_sample(checkouts[side], args, sentences_path, tokens)
                else:
                    sample = train_sample(checkouts[side], args, Path(tmp) / f"{side}{r}")
                samples[side].append(sample)
                print(f"[ab] round {r + 1} {side} ({checkouts[side]}): {key} {sample[key]}", file=sys.stderr)
    medians = {side: statistics.median(s[key] for s in samples[side]) for side in samples}
    result = {
        "command": "python -m bench.ab " + " ".join(sys.argv[1:] if argv is None else argv),
        "cpu": cpu(), "note": args.note, "mode": args.mode, "measure": key,
        "checkouts": {side: {"path": str(p), "commit": commit(p)} for side, p in checkouts.items()},
        "median": medians, "b_over_a": round(medians["b"] / medians["a"], 3), "samples": samples,
    }
    print(render(result))
    if args.out:
        from tagger.fileio import write_text

        write_text(args.out, json.dumps(result, indent=1) + "\n")
        write_text(args.out.with_suffix(".md"), render(result))
    return 0


def render(result: dict[str, Any]) -> str:
    """The medians, their ratio and every sample, as Markdown."""
    key, a, b = result["measure"], result["checkouts"]["a"], result["checkouts"]["b"]
    lines = [f"# `{key}`: {a['commit']} against {b['commit']}", "",
             f"CPU: {result['cpu']['model']}. Command: `{result['command']}`. Each round runs one fresh process per "
             "checkout, the two taking turns (A then B, then B then A); the figure is the median over the rounds.", "",
             f"| checkout | commit | median {key} | samples |", "|---|---|---|---|"]
    for side, c in (("a", a), ("b", b)):
        samples = ", ".join(str(s[key]) for s in result["samples"][side])
        lines.append(f"| {side} | {c['commit']} | {result['median'][side]} | {samples} |")
    lines += ["", f"b / a = **{result['b_over_a']}**", ""]
    if result.get("note"):
        lines += [result["note"], ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
