"""Export a trained tagger's encoder to ONNX: ``tagger export``.

``tagger export RUN_DIR|best.json|CKPT|NAME:VERSION [--out model.onnx]`` writes the model's inference graph
(:func:`tagger.inference.export.export_onnx`, checked against torch) to an ONNX file.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from tagger.artifacts import runs
from tagger.artifacts.checkpoint import CheckpointError
from tagger.fileio import atomic_open
from tagger.inference.export import ExportError, export_onnx


def _default_out(arg: str, source: runs.Source) -> Path | None:
    """RUN_DIR/model.onnx for a run dir or best.json, CKPT.onnx for a checkpoint, None for a store tag."""
    if source.checkpoint is None:
        return None
    if Path(arg).suffix == ".ckpt" or source.run_dir is None:
        return source.checkpoint.with_suffix(".onnx")
    return source.run_dir / "model.onnx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagger export", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help=f"what to export: {runs.KINDS}")
    parser.add_argument("--out", type=Path, help="ONNX file to write (default: RUN_DIR/model.onnx or CKPT.onnx; "
                        "required for a store tag)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        source = runs.resolve(args.source)
        out = args.out or _default_out(args.source, source)
        if out is None:
            parser.error(f"{args.source} is a model store tag: give --out")
        loaded = runs.load(source)
        data, info = export_onnx(loaded.tagger, loaded.vocab)
    except (CheckpointError, ExportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with atomic_open(out) as f:
        f.write(data)
    print(json.dumps({"onnx": str(out), "checkpoint": str(source.checkpoint or source.store_tag), **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
