"""Package a trained run into the BentoML model store: ``tagger package``.

``tagger package RUN_DIR|best.json|CKPT [--name tagger]``
``tagger package --best [--task pos] [--if-missing]``  (what ``make serve`` runs)

What a package holds and how it is checked: :mod:`tagger.artifacts.package`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

import torch

from tagger.artifacts.checkpoint import CheckpointError
from tagger.artifacts.package import DEFAULT_NAME, package
from tagger.artifacts.runs import find_best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagger package", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", help="run dir, best.json or .ckpt file")
    parser.add_argument("--name", default=DEFAULT_NAME, help="model name in the BentoML store (default: %(default)s)")
    parser.add_argument("--best", action="store_true", help="package the best available run (a reports/**/best.json whose checkpoint is here, "
                        "else highest dev score under multirun/ and runs/)")
    parser.add_argument("--task", default="pos", choices=["pos", "ner"], help="task for --best")
    parser.add_argument("--if-missing", action="store_true", help="do nothing if NAME:latest is already in the store")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)

    import bentoml

    if args.if_missing:
        try:
            existing = bentoml.models.get(f"{args.name}:latest")
        except bentoml.exceptions.NotFound:
            existing = None
        if existing is not None:
            print(f"{existing.tag} already in the store; not packaging")
            return 0
    source = args.source
    if args.best:
        source = find_best(args.task)
        if source is None:
            print(f"no trained {args.task} run found (train one with `make train`, or pass a run dir)", file=sys.stderr)
            return 1
    if source is None:
        parser.error("give a run dir / best.json / checkpoint, or --best")
    try:
        model = package(source, args.name)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    meta = model.info.metadata
    main_metric = meta.get("main_metric")
    print(json.dumps({"tag": str(model.tag), "source": str(source), "task": meta["task"],
                      "dev": meta["dev"].get(main_metric), "test": meta["test"].get(main_metric),
                      "path": str(model.path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
