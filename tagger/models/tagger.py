"""Tagger = embedder -> encoder -> head, built from config dicts and a vocabulary."""
from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

from tagger.data.vocab import Vocab

if TYPE_CHECKING:
    from tagger.data.vectors import Vectors


class AttentionNotSupported(TypeError):
    """The encoder has no attention weights to show (window_fc, bilstm)."""


class Tagger(nn.Module):
    """The encoder contract: an ``nn.Module`` with ``output_dim``, ``forward(x (B,T,D), mask (B,T)) -> (B,T,output_dim)``
    and a class attribute ``has_attention``; where it is True, ``forward(x, mask, need_weights=True)`` returns
    ``(h, weights)``, weights a list per layer of (B,heads,T,T).

    ``doc_window``: trained on rows of consecutive sentences of a document up to that many tokens
    (``data.doc_window``); prediction then tags documents in windows of that size. None: sentences alone.
    ``aux``: an auxiliary training objective (``tagger.models.objectives``, config group ``aux``); it adds
    to the training loss only and never changes what the model predicts."""

    def __init__(self, embedder: nn.Module, encoder: nn.Module, head: nn.Module, doc_window: int | None = None,
                 aux: nn.Module | None = None):
        super().__init__()
        self.embedder, self.encoder, self.head = embedder, encoder, head
        self.doc_window = doc_window
        self.aux = aux

    @property
    def supports_attention(self) -> bool:
        """What the encoder declares (``has_attention``, part of the encoder contract)."""
        return bool(self.encoder.has_attention)

    @property
    def max_len(self) -> int | None:
        """Longest input the encoder accepts in one piece (None: any length)."""
        return getattr(self.encoder, "max_len", None)

    def embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """A batch holds each token's characters, chars (B,T,L), or each distinct word's once, type_chars (U,L) with
        types (B,T) (:class:`tagger.data.encoding.EncodedRows`)."""
        if "types" in batch:
            return self.embedder(batch["words"], batch["type_chars"], batch["types"])  # (B,T,D)
        return self.embedder(batch["words"], batch["chars"])  # (B,T,D)

    def encode(self, batch: dict[str, torch.Tensor], x: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (B,T,D): the embedder output when the caller has it already (the auxiliary objectives)."""
        return self.encoder(self.embed(batch) if x is None else x, batch["mask"])  # (B,T,H)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``batch["starts"]`` (B,T) bool, optional: sentence starts inside rows of several sentences."""
        x = self.embed(batch)  # (B,T,D)
        loss = self.head.loss(self.encode(batch, x), batch["tags"], batch["mask"], batch.get("starts"))
        if self.aux is None or not self.training:
            return loss
        return loss + self.aux.weight * self.aux.term(self, batch, x, loss)  # a second pass (objectives.py)

    def predict(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """-> predicted tag ids (B,T), probability of each (B,T); padding positions are 0."""
        return self.head.decode(self.encode(batch), batch["mask"], batch.get("starts"))

    def tags(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """-> predict's tag ids (B,T) without the probabilities (0 on padding)."""
        return self.head.tags(self.encode(batch), batch["mask"], batch.get("starts"))

    def attention(self, batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Attention weights per layer, each (B,heads,T,T)."""
        if not self.supports_attention:
            raise AttentionNotSupported(f"{type(self.encoder).__name__} has no attention weights")
        _, weights = self.encoder(self.embed(batch), batch["mask"], need_weights=True)
        return weights


def target_class(target: str) -> type:
    """The class a config's ``_target_`` names (``package.module.Class``)."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"_target_ {target!r} names no importable class: {e}") from e


def construct(config: dict[str, Any], **objects: Any) -> Any:
    """The object a flat config dict describes: ``_target_`` called with the config's values plus ``objects``.

    The config holds settings only; data (vocabulary words, characters, labels, vector tables) arrives in
    ``objects`` as plain Python values and is handed to the constructor untouched, never through OmegaConf,
    where a corpus token such as ``???`` or ``${x}`` would be read as config syntax. Saved model configs are
    flat (no nested ``_target_``), so this needs no Hydra: loading a model for serving stays free of it.
    """
    settings = {k: v for k, v in config.items() if k != "_target_"}
    clash = settings.keys() & objects.keys()
    if clash:
        raise ValueError(f"{config['_target_']}: {sorted(clash)} come from the data, not the config")
    return target_class(config["_target_"])(**settings, **objects)


def build_tagger(config: dict[str, Any], vocab: Vocab, vectors: "Vectors | None" = None) -> Tagger:
    """config: {"embedder": {...}, "model": {...}, "head": {...}}, each with a ``_target_``, and
    optionally "doc_window" (the ``data.doc_window`` the model was trained with) and "aux" (an auxiliary
    objective, with a ``_target_``).

    ``vectors``: pretrained vectors to initialise the word table from (training only; a saved model's
    table comes from its state dict). The vocabulary must have been built with the same vectors.
    """
    data: dict[str, Any] = {"num_words": len(vocab.words), "num_chars": len(vocab.chars),
                            "word_counts": vocab.counts, "chars": vocab.chars}
    if config["embedder"].get("vectors"):
        data["trained_words"] = vocab.num_trained
    if vectors is not None:
        rows, found = vectors.rows(vocab.words)
        data["vector_rows"], data["vector_found"] = torch.from_numpy(rows), torch.from_numpy(found)
    embedder = construct(config["embedder"], **data)
    encoder = construct(config["model"], input_dim=embedder.output_dim)
    head = construct(config["head"], input_dim=encoder.output_dim, labels=vocab.labels, scheme=vocab.tag_scheme)
    aux = None
    if config.get("aux"):
        # each objective's constructor names the sizes it needs (MaskedWords: both; Adversarial: none)
        sizes = {"input_dim": encoder.output_dim,
                 "word_dim": embedder.word.embedding_dim if embedder.word is not None else 0}
        wanted = inspect.signature(target_class(config["aux"]["_target_"])).parameters
        aux = construct(config["aux"], **{k: v for k, v in sizes.items() if k in wanted})
    return Tagger(embedder, encoder, head, doc_window=config.get("doc_window"), aux=aux)
