"""Reading a packaged model back from the BentoML model store: what the service's workers, ``tagger.load`` and
every command given a store tag run. The folder's layout and integrity check are :mod:`.package_format`; writing it
is :mod:`.package`.

Each part is checked against the metadata recorded at packaging (format, files, weights sha256, labels) before the
tagger is rebuilt from its saved config, vocabulary and safetensors weights: no pickled code is read.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tagger.artifacts.checkpoint import LoadedModel, model_from_parts
from tagger.artifacts.package_format import MODEL_CONFIG, VOCAB, WEIGHTS, PackageError, check_parts
from tagger.data.vocab import Vocab


def load_parts(folder: str | Path, metadata: dict[str, Any], tag: str) -> LoadedModel:
    """Rebuild the tagger from a packaged folder, checking every part against the metadata."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    check_parts(folder, metadata, tag)
    try:
        vocab = Vocab.load(folder / VOCAB)
        config = json.loads((folder / MODEL_CONFIG).read_text())
        state = load_file(str(folder / WEIGHTS))
    except (ValueError, TypeError, KeyError, SafetensorError) as e:
        raise PackageError(f"{tag}: cannot read the packaged model in {folder}: {type(e).__name__}: {e}") from e
    if metadata.get("labels") is not None and list(metadata["labels"]) != vocab.labels:
        raise PackageError(f"{tag}: {VOCAB} labels {vocab.labels} differ from the metadata's {metadata['labels']}")
    for name, card in (metadata.get("tasks") or {}).items():
        if name not in vocab.task_names or list(card.get("labels", [])) != vocab.for_task(name).labels:
            raise PackageError(f"{tag}: task {name}: {VOCAB} labels differ from the metadata's {card.get('labels')}")
    tagger = model_from_parts(config, vocab, state, f"{tag} ({folder})")
    return LoadedModel(tagger, vocab, config, folder, tag=tag, metadata=metadata)


def load_packaged(model) -> LoadedModel:
    """Load a ``bentoml.Model`` (from ``bentoml.models.get`` or a service's ``BentoModel``)."""
    return load_parts(model.path, dict(model.info.metadata), str(model.tag))
