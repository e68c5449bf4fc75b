"""The folder of a packaged model and its integrity check, importable without torch: ``bentoml serve``'s entry
process checks the store entry with it before any worker starts (:mod:`serve.service`), and stays small.
Packaging and loading are :mod:`tagger.artifacts.package`."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tagger.errors import CheckpointError

WEIGHTS, VOCAB, MODEL_CONFIG, RUN_INFO = "weights.safetensors", "vocab.json", "model.json", "run.json"
FORMAT = 1  # bump when the folder layout changes; the loader refuses formats it does not know


class PackageError(CheckpointError):
    """A run cannot be packaged, or a packaged model is missing files, corrupted or inconsistent."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_parts(folder: Path, metadata: dict[str, Any], tag: str) -> None:
    """Cheap integrity check of a packaged folder (no model built): format, files, weights hash."""
    if metadata.get("format") != FORMAT:
        raise PackageError(f"{tag}: package format {metadata.get('format')!r}, this code reads format {FORMAT}")
    for name in (WEIGHTS, VOCAB, MODEL_CONFIG):
        if not (folder / name).is_file():
            raise PackageError(f"{tag}: {name} is missing from {folder}")
    if sha256(folder / WEIGHTS) != metadata.get("weights_sha256"):
        raise PackageError(f"{tag}: {WEIGHTS} does not match the sha256 recorded at packaging (corrupted?)")
