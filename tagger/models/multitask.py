"""Several tasks on one body: MultiTaskTagger = embedder -> encoder -> one head per task.

Each task (part-of-speech tags from one corpus, entities from another, ...) has its own head, labels and loss
weight; the embedder and encoder are shared. A training batch holds the sentences of one task, so its loss reaches
that task's head and the shared body only (:meth:`MultiTaskTagger.loss`); prediction runs the encoder once and every
head on its output (:class:`tagger.inference.predictor.Predictor`).

The saved model config is ``{"embedder", "model", "tasks": {NAME: {"head": {...}, "weight": w}}}``; the labels of
each task are data and live in the vocabulary (``Vocab.tasks``), never in the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

from tagger.data.vocab import Vocab
from tagger.models.tagger import Tagger, build_tagger, construct

if TYPE_CHECKING:
    from tagger.data.vectors import Vectors


class MultiTaskTagger(nn.Module):
    """The encoder contract of :class:`Tagger` with ``heads``, one tag head per task (``heads[NAME]``), instead of
    one ``head``. ``weights``: each task's loss weight (training only).

    ``loss(batch)`` and ``predict(batch)`` read the batch's task from ``batch["task"]`` (a task name): every
    sentence of a batch belongs to one task."""

    # the body is Tagger's: embedder and encoder, read the same way
    supports_attention = Tagger.supports_attention
    max_len = Tagger.max_len
    embed = Tagger.embed
    encode = Tagger.encode
    attention = Tagger.attention

    def __init__(self, embedder: nn.Module, encoder: nn.Module, heads: dict[str, nn.Module],
                 weights: dict[str, float] | None = None):
        super().__init__()
        if not heads:
            raise ValueError("a multi-task model needs at least one task (config key tasks)")
        self.embedder, self.encoder = embedder, encoder
        self.heads = nn.ModuleDict(heads)
        self.weights = {name: float((weights or {}).get(name, 1.0)) for name in heads}
        self.doc_window = None  # document context is a single-task option
        self.aux = None

    @property
    def task_names(self) -> list[str]:
        return list(self.heads)

    def _head(self, batch: dict[str, Any]) -> nn.Module:
        task = batch.get("task")
        if task not in self.heads:
            raise KeyError(f"batch task {task!r}: the model's tasks are {', '.join(self.heads)}")
        return self.heads[task]

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        """The weighted loss of the batch's task; only its head (and the body) is in the graph."""
        head = self._head(batch)
        h = self.encode(batch)  # (B,T,H)
        return self.weights[batch["task"]] * head.loss(h, batch["tags"], batch["mask"], batch.get("starts"))

    def predict(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """-> the batch task's tag ids (B,T) and probability of each (B,T); padding positions are 0."""
        return self._head(batch).decode(self.encode(batch), batch["mask"], batch.get("starts"))

    def tags(self, batch: dict[str, Any]) -> torch.Tensor:
        """-> predict's tag ids (B,T) of the batch's task without the probabilities (0 on padding)."""
        return self._head(batch).tags(self.encode(batch), batch["mask"], batch.get("starts"))


def is_multitask(config: dict[str, Any]) -> bool:
    """Whether a saved model config describes a model of several tasks."""
    return "tasks" in config


def build_multitask_tagger(config: dict[str, Any], vocab: Vocab, vectors: "Vectors | None" = None) -> MultiTaskTagger:
    """config: {"embedder": {...}, "model": {...}, "tasks": {NAME: {"head": {...}, "weight": w}}}; ``vocab``: the
    shared words and characters, with each task's labels in ``vocab.tasks`` (the same names, in the same order)."""
    if list(config["tasks"]) != vocab.task_names or vocab.tasks is None:
        raise ValueError(f"the model config's tasks {list(config['tasks'])} are not the vocabulary's "
                         f"{vocab.task_names}")
    for key in ("aux", "doc_window"):
        if config.get(key):
            raise ValueError(f"{key}: not available for a multi-task model (config key tasks)")
    # the body is built as a single-task tagger's, around the first task's head
    first, *_ = config["tasks"]
    body = build_tagger({"embedder": config["embedder"], "model": config["model"],
                         "head": config["tasks"][first]["head"]}, vocab.for_task(first), vectors)
    heads = {first: body.head}
    for name, task in list(config["tasks"].items())[1:]:
        task_vocab = vocab.for_task(name)
        heads[name] = construct(task["head"], input_dim=body.encoder.output_dim, labels=task_vocab.labels,
                                scheme=task_vocab.tag_scheme)
    weights = {name: task.get("weight", 1.0) for name, task in config["tasks"].items()}
    return MultiTaskTagger(body.embedder, body.encoder, heads, weights)


def build_model(config: dict[str, Any], vocab: Vocab, vectors: "Vectors | None" = None) -> Tagger | MultiTaskTagger:
    """The tagger a saved or composed model config describes: one head (:func:`build_tagger`) or one per task."""
    if is_multitask(config):
        return build_multitask_tagger(config, vocab, vectors)
    return build_tagger(config, vocab, vectors)
