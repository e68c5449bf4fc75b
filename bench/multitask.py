"""One model of several tasks against single-task models run one after the other: ``python -m bench.multitask MT POS NER``.

What a user saves by tagging part-of-speech and entities with one multi-task model (one encoder pass, every head on
its output: :meth:`tagger.inference.predictor.Predictor.predict_tasks`) instead of two single-task models, one
pass each. Both sides run on the same backend (default: the service's), threads and batches, over the EWT test
sentences (gold tokens); tokens/s is the median of ``--repeats`` passes after two untimed ones, the two sides taking
turns pass by pass, words cached and the loaded heap frozen as the service freezes it (as :mod:`bench.backends`).
Speed does not depend on what the weights learned, so any trained models of these shapes measure it.

Writes ``OUT/bench_multitask.md`` and ``.json`` (``--out``, default ``reports/``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

COMMAND = "python -m bench.multitask MT_RUN POS_RUN NER_RUN"
TARGET = 1.6  # multi-task tokens/s over the single-task models' in turn, at least
ONE_MODEL, IN_TURN = "one multi-task model (every task)", "single-task models one after the other"


def bench(args) -> dict[str, Any]:
    from bench.backends import cpu, time_passes
    from bench.loadgen import ewt_split, frozen_heap
    from tagger.artifacts.runs import load, resolve
    from tagger.inference.backends import make_predictor

    torch.set_num_threads(args.threads)
    models = {name: load(resolve(run)) for name, run in (("multitask", args.multitask), ("pos", args.pos),
                                                        ("ner", args.ner))}
    tasks = models["multitask"].vocab.tasks
    if not tasks or len(tasks) < 2:
        raise SystemExit(f"{args.multitask}: not a model of several tasks")
    for name in ("pos", "ner"):
        if models[name].vocab.tasks:
            raise SystemExit(f"{getattr(args, name)}: a model of several tasks, where a single-task one is wanted")
    predictors = {name: make_predictor(m.tagger, m.vocab, args.backend, threads=args.threads,
                                       batch_size=args.batch_size) for name, m in models.items()}
    test = ewt_split(args.data_dir, "test")[0]
    if args.quick:
        test = test[:300]
    tokens = sum(map(len, test))
    mt, pos, ner = predictors["multitask"], predictors["pos"], predictors["ner"]
    runners = {ONE_MODEL: lambda: mt.predict_tasks(test), IN_TURN: lambda: (pos.predict(test), ner.predict(test)),
               "POS model alone": lambda: pos.predict(test), "NER model alone": lambda: ner.predict(test)}
    with frozen_heap():
        speeds = time_passes(runners, tokens, args.repeats)
    medians = {name: round(statistics.median(s)) for name, s in speeds.items()}
    return {"cpu": cpu(), "backend": args.backend, "threads": args.threads, "batch_size": args.batch_size,
            "repeats": args.repeats, "test_tokens": tokens, "quick": args.quick,
            "tasks": list(tasks), "models": {name: {"params": sum(p.numel() for p in m.tagger.parameters()),
                                                    "config": m.config.get("model", {}).get("_target_")}
                                             for name, m in models.items()},
            "tokens_per_s": medians, "runs_tokens_per_s": speeds,
            "ratio": round(medians[ONE_MODEL] / medians[IN_TURN], 2), "target": TARGET}


def render(res: dict[str, Any]) -> str:
    c = res["cpu"]
    lines = ["# Several tasks from one model against single-task models in turn (EWT test)", "",
             f"CPU: {c['model']}, {c['logical_cpus']} logical CPUs; torch {c['torch']}. Backend `{res['backend']}`, "
             f"{res['threads']} threads, batches of {res['batch_size']} sentences, EWT test ({res['test_tokens']:,} "
             f"tokens, gold tokenisation), median of {res['repeats']} passes after two untimed ones, taking turns. "
             f"Tasks of the multi-task model: {', '.join(res['tasks'])}. Command: `{COMMAND}`.", ""]
    if res["quick"]:
        lines += ["**--quick: 300 sentences; not figures to quote.**", ""]
    lines += ["| what runs | tokens/s (every token gets each task's tag) |", "|---|---|"]
    lines += [f"| {name} | {tps:,} |" for name, tps in res["tokens_per_s"].items()]
    met = "met" if res["ratio"] >= res["target"] else "**not met**"
    lines += ["", f"One multi-task model / single-task models in turn: **{res['ratio']:.2f}×** (target ≥ "
              f"{res['target']}×: {met}).", ""]
    if res.get("note"):
        lines += [res["note"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from bench.backends import speed_arguments, write_report
    from tagger.inference.backends import DEFAULT_BACKEND

    parser = argparse.ArgumentParser(prog="python -m bench.multitask", description=__doc__.split("\n\n")[0])
    parser.add_argument("multitask", help="the multi-task model: run dir, best.json, .ckpt or store tag")
    parser.add_argument("pos", help="a single-task POS model")
    parser.add_argument("ner", help="a single-task NER model")
    parser.add_argument("--backend", default=DEFAULT_BACKEND)
    speed_arguments(parser, "bench_multitask.md and .json")
    args = parser.parse_args(argv)
    results = bench(args)
    results["note"] = args.note
    write_report(args.out, "bench_multitask", results, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
