"""Package a trained run into the BentoML model store (reading it back: :mod:`tagger.artifacts.packaged`; the
command: ``tagger package``, :mod:`tagger.commands.package`).

A packaged model is a folder of plain data, no pickled code:

* ``weights.safetensors`` — the state dict of the :class:`~tagger.models.tagger.Tagger`;
* ``vocab.json`` — words, characters and labels exactly as saved with the checkpoint;
* ``model.json`` — the embedder/model/head config (each with ``_target_``) that rebuilds the net;
* ``run.json`` — the run's ``metrics.json`` (full config, command, all metrics), for provenance;

plus, in BentoML's model info, labels for ``bentoml models list`` and metadata: task, tag scheme,
label list, dev/test metrics, sha256 of the data files and of the weights, the git commit.

``bentoml.models.create`` writes into a temporary folder and only copies it into the store and
moves ``latest`` when its ``with`` block exits cleanly; the block ends by loading the written files
back and checking they predict what the checkpoint predicts, so an interrupted or broken packaging
never becomes ``name:latest``.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import torch

from tagger.artifacts.checkpoint import LoadedModel, load_checkpoint
from tagger.artifacts.package_format import (  # noqa: F401 (the folder's names, re-exported)
    FORMAT, MODEL_CONFIG, RUN_INFO, VOCAB, WEIGHTS, PackageError, check_parts, sha256,
)
from tagger.artifacts.packaged import load_packaged
from tagger.artifacts.provenance import data_hashes, git_commit
from tagger.artifacts.runs import Source, resolve
from tagger.data.vocab import Vocab
from tagger.fileio import write_json
from tagger.inference.predictor import Predictor
from tagger.metrics import MAIN_METRIC
from tagger.models.tagger import Tagger

log = logging.getLogger(__name__)

DEFAULT_NAME = "tagger"


# -- metadata ----------------------------------------------------------------------------------
def _scalars(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """Top-level numbers of a dev/test metrics dict (per-tag tables stay in run.json)."""
    return {k: v for k, v in (metrics or {}).items() if isinstance(v, (int, float, str))}


def _plain(value: Any) -> Any:
    """JSON-like data that BentoML's model.yaml accepts: no None (absent = unknown), no Path."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def _task_cards(vocab: Vocab, metrics: dict[str, Any]) -> dict[str, Any] | None:
    """A multi-task model's tasks for its metadata: kind, scheme, labels and dev/test scores of each (None: one
    task)."""
    if vocab.tasks is None:
        return None
    return {name: {"task": spec["task"], "tag_scheme": spec.get("tag_scheme"), "labels": list(spec["labels"]),
                   "main_metric": MAIN_METRIC[spec["task"]], "dev": _scalars((metrics.get("dev") or {}).get(name)),
                   "test": _scalars((metrics.get("test") or {}).get(name))}
            for name, spec in vocab.tasks.items()}


def metadata_for(loaded: LoadedModel, source: Source, weights_sha: str) -> dict[str, Any]:
    """``task``: pos, ner, or ``multitask`` for a model of several tasks, whose ``tasks`` then hold each task's kind,
    scheme, labels and scores (``labels`` and ``tag_scheme`` are its first task's, as in its vocabulary)."""
    m, vocab, tagger = source.metrics, loaded.vocab, loaded.tagger
    return _plain({
        "format": FORMAT,
        "task": vocab.task if vocab.tasks is None else "multitask",
        "tasks": _task_cards(vocab, m),
        "tag_scheme": vocab.tag_scheme,
        "labels": list(vocab.labels),
        "data": m.get("data"),
        "model": m.get("model"),
        "head": m.get("head"),
        "params": sum(p.numel() for p in tagger.parameters()),
        "main_metric": m.get("main_metric"),
        "dev": _scalars(m.get("dev")),
        "test": _scalars(m.get("test")),
        "supports_attention": tagger.supports_attention,
        "max_len": tagger.max_len,
        "data_files": data_hashes(m),
        "git": m.get("git") or git_commit(),
        "checkpoint": str(source.checkpoint.resolve()),
        "run_dir": str(source.run_dir.resolve()) if source.run_dir else None,
        "command": m.get("command"),
        # the model it was fine-tuned from (tagger.training.transfer): where, what it scored, its commit; config in run.json
        "init_from": {k: v for k, v in (m.get("init_from") or {}).items() if k not in ("config", "transferred")} or None,
        "weights_sha256": weights_sha,
        "torch": str(torch.__version__),
    })


# -- writing the folder ------------------------------------------------------------------------
def weights_bytes(tagger: Tagger) -> bytes:
    """The tagger's state dict as safetensors bytes (tensors only: nothing to unpickle)."""
    from safetensors.torch import save

    state = {k: v.detach().contiguous() for k, v in tagger.state_dict().items()}
    return save(state, metadata={"format": str(FORMAT)})


def write_parts(folder: Path, loaded: LoadedModel, weights: bytes, metrics: dict[str, Any]) -> None:
    """Write weights, vocab, model config and run info into ``folder``."""
    (folder / WEIGHTS).write_bytes(weights)
    loaded.vocab.save(folder / VOCAB)
    write_json(folder / MODEL_CONFIG, loaded.config)
    write_json(folder / RUN_INFO, metrics)


def _probe(vocab: Vocab) -> list[list[str]]:
    words = [w for w in vocab.words[2:40]] or ["x"]
    return [words, words[::-1][:7], ["<unseen-word>", *words[:3]]]


def _check_same_predictions(a: Tagger, b: Tagger, vocab: Vocab, what: str) -> None:
    """Every task's predictions of ``a`` and ``b`` on a probe, equal (PackageError otherwise)."""
    probe = _probe(vocab)
    pa, pb = Predictor(a, vocab).predict_tasks(probe), Predictor(b, vocab).predict_tasks(probe)
    for task in pa:
        for sa, sb in zip(pa[task], pb[task]):
            for x, y in zip(sa, sb):
                if x.tag != y.tag or abs(x.score - y.score) > 1e-5:
                    raise PackageError(f"{what}: the packaged weights predict differently from the checkpoint")


# -- the command -------------------------------------------------------------------------------
def package(path: str | Path, name: str = DEFAULT_NAME):
    """Save the run/checkpoint at ``path`` as a new version of ``name`` in the BentoML model store."""
    import bentoml

    source = resolve(path)
    if source.checkpoint is None:
        raise PackageError(f"{path}: already a packaged model ({source.store_tag}); give a run dir, best.json or .ckpt")
    loaded = load_checkpoint(source.checkpoint)
    task = loaded.vocab.task if loaded.vocab.tasks is None else "multitask"
    labels = {k: str(v) for k, v in (("task", task), ("data", source.metrics.get("data")),
                                     ("model", source.metrics.get("model")), ("head", source.metrics.get("head")))
              if v is not None}
    weights = weights_bytes(loaded.tagger)
    metadata = metadata_for(loaded, source, hashlib.sha256(weights).hexdigest())
    # nothing below reaches the store unless the block exits cleanly (create() saves on exit)
    with bentoml.models.create(name, labels=labels, metadata=metadata) as model:
        write_parts(Path(model.path), loaded, weights, source.metrics)
        model.flush()  # model.yaml now, so the check below reads the folder exactly as a server will
        reread = load_packaged(bentoml.Model.from_path(model.path))
        _check_same_predictions(loaded.tagger, reread.tagger, loaded.vocab, str(model.tag))
    log.info("packaged %s from %s", model.tag, source.checkpoint)
    return bentoml.models.get(model.tag)
