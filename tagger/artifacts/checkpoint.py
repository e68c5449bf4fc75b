"""Reading and writing checkpoints safely, and :class:`LoadedModel`, the one record of a loaded tagger.

Every checkpoint holds the weights plus ``checkpoint["tagger"] = {"config", "vocab"}`` as plain
data, so it loads with ``torch.load(weights_only=True)`` and the model is rebuilt from the saved
config and vocabulary — never from the corpus.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tagger.data.vocab import Vocab
from tagger.errors import CheckpointError  # noqa: F401 (raised here; importable without torch from tagger.errors)
from tagger.models.multitask import MultiTaskTagger, build_model
from tagger.models.tagger import Tagger

CHECKPOINT_KEY = "tagger"


@dataclass
class LoadedModel:
    """A trained tagger ready to predict, read from a checkpoint (:func:`load_checkpoint`) or from a packaged model
    in the BentoML store (:func:`tagger.artifacts.packaged.load_packaged`): the net, the vocabulary and the model
    config saved with it, and where it was read from."""

    tagger: Tagger | MultiTaskTagger  # a MultiTaskTagger where vocab.tasks names several tasks
    vocab: Vocab
    config: dict[str, Any]
    path: Path  # the checkpoint file, or the packaged model's folder in the store
    epoch: int | None = None  # epoch the checkpoint was saved at (None for a packaged model)
    tag: str | None = None  # a packaged model's store tag (NAME:VERSION)
    metadata: dict[str, Any] | None = None  # a packaged model's metadata (task, labels, metrics, provenance)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        # torch.load does not check the zip records' CRC32s: a flipped bit inside tensor data would load
        # as different weights. testzip() reads every record and names the first damaged one.
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
        if damaged is not None:
            raise CheckpointError(f"checkpoint {path} is corrupted: CRC mismatch in {damaged}")
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except Exception as e:  # truncated zip, garbage bytes, pickled code: all refused here
        raise CheckpointError(f"cannot read checkpoint {path}: {type(e).__name__}: {e}") from e
    if not isinstance(ckpt, dict) or CHECKPOINT_KEY not in ckpt or "state_dict" not in ckpt:
        raise CheckpointError(f"{path} is not a tagger checkpoint (no '{CHECKPOINT_KEY}' config/vocab entry)")
    return ckpt


def _current(config: dict[str, Any]) -> dict[str, Any]:
    """A saved model config as :func:`build_tagger` reads it. Models saved before ``embedder.vectors`` existed
    carry ``embedder.pretrained: null``, which the embedder does not take: it is dropped."""
    embedder = {k: v for k, v in config["embedder"].items() if not (k == "pretrained" and v is None)}
    return {**config, "embedder": embedder}


def model_from_parts(config: dict[str, Any], vocab: Vocab, state_dict: dict[str, torch.Tensor],
                     source: str) -> Tagger | MultiTaskTagger:
    tagger = build_model(_current(config), vocab)
    try:
        tagger.load_state_dict(state_dict)
    except RuntimeError as e:
        raise CheckpointError(f"{source}: weights do not match the saved config: {e}") from e
    return tagger.eval()


def load_checkpoint(path: str | Path) -> LoadedModel:
    ckpt = read_checkpoint(path)
    saved = ckpt[CHECKPOINT_KEY]
    vocab = Vocab.from_dict(saved["vocab"])
    state = {k.removeprefix("tagger."): v for k, v in ckpt["state_dict"].items() if k.startswith("tagger.")}
    tagger = model_from_parts(saved["config"], vocab, state, str(path))
    return LoadedModel(tagger, vocab, saved["config"], Path(path), ckpt.get("epoch"))
