"""Sequence labelling (POS, NER): ``tagger.load(source)`` returns a pipeline that tags text (see :mod:`tagger.api`).

Importing the package is cheap: torch, Lightning and Hydra load when a model does.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tagger.limits import BATCH_SIZE

if TYPE_CHECKING:
    from tagger.api import Pipeline, Sentence, Span

__all__ = ["load", "Pipeline", "Sentence", "Span"]


def load(source: str | os.PathLike, *, threads: int | None = None, batch_size: int = BATCH_SIZE,
         backend: str = "fp32") -> "Pipeline":
    """A pipeline for a run dir, a report's ``best.json``, a ``.ckpt`` file or a BentoML model-store tag;
    ``backend``: fp32, bf16, int8, onnx or onnx-int8 (:mod:`tagger.inference.backends`)."""
    from tagger.api import load as _load

    return _load(source, threads=threads, batch_size=batch_size, backend=backend)


def __getattr__(name: str) -> Any:
    if name in ("Pipeline", "Sentence", "Span"):
        import tagger.api

        return getattr(tagger.api, name)
    raise AttributeError(f"module 'tagger' has no attribute {name!r}")
