"""Each word's encoder input (word vector ++ character-CNN/casing features) computed once and kept between calls.

In eval mode what the embedder gives a token depends on the word alone, so a predictor need not look up its
characters, run the character CNN or gather its vector again for a word it has seen: it keeps one row per word in a
table and feeds the encoder ``table[rows]``. Profiled on EWT test, the lookup, the character CNN and the padding of
their inputs were about a quarter of a pass of the default POS model. The table holds at most ``capacity`` rows and
is emptied when a batch's new words would not fit (a plain bound for a long-running service; frequent words come
back at once).

Hand-written because it is the predictor's own data path: no library caches rows of a model's intermediate output.
"""
from __future__ import annotations

import itertools
import threading
from typing import Callable, Protocol

import torch

from tagger.data.encoding import padded
from tagger.data.vocab import PAD_ID


class FeatureBackend(Protocol):
    """A backend split at the encoder's input (:class:`tagger.inference.predictor.TorchBackend`)."""

    def features(self, type_words: torch.Tensor, type_chars: torch.Tensor) -> torch.Tensor:
        """type_words (U,), type_chars (U,L) -> (U,F) the embedder output of each word."""

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B,T,F), mask (B,T) -> h (B,T,H) float32."""


class WordFeatures:
    """word -> row of a table of encoder inputs; ``encode(sentences)`` -> (h (B,T,H), mask (B,T)).

    ``lookup``: word -> (word id, clipped character ids), run once per new word. Row 0 holds the features of
    padding (the empty word), as the full graph computes them.

    Threads share one table (:mod:`tagger.inference.pass_threads` runs passes side by side). A row of a table tensor,
    once in use, is never written again: new words go to rows past ``size`` or into a new, larger tensor, and forgetting
    the words drops the tensor. So a pass reads the tensor it was handed without the lock, which guards only the
    word-to-row map and the table's growth.
    """

    def __init__(self, backend: FeatureBackend, lookup: Callable[[str], tuple[int, list[int]]], capacity: int):
        if capacity < 1:
            raise ValueError(f"need capacity >= 1, got {capacity}")
        self.backend, self.lookup, self.capacity = backend, lookup, capacity
        self.rows: dict[str, int] = {}
        self.table: torch.Tensor | None = None  # (rows, F), allocated on first use in the backend's dtype
        self.size = 0  # rows in use, row 0 included
        self.lock = threading.Lock()

    def clear(self) -> None:
        """Forget every word; the table tensor is dropped, since passes running now may still read it."""
        with self.lock:
            self._forget()

    def _forget(self) -> None:  # under the lock
        self.rows = {}
        self.size = 0
        self.table = None  # not reused in place: a pass running now may still read its rows

    def encode(self, sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences -> the encoder output h (B,T,H) and the mask (B,T) of real tokens."""
        table, ids, mask = self._rows(sentences)  # (N,F), (B,T), (B,T)
        return self.backend.encode(table[ids], mask), mask  # (B,T,H)

    def tag(self, sentences: list[list[str]], rows_to_tags: Callable) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences -> tag ids (B,T) and probabilities (B,T) by ``rows_to_tags(table, ids)``
        (:class:`tagger.inference.capture.RowsToTags`), which reads the table tensor as it is once the batch's words are
        in."""
        table, ids, _ = self._rows(sentences)  # (N,F), (B,T)
        return rows_to_tags(table, ids)  # (B,T), (B,T)

    def _rows(self, sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The table tensor (N,F) as it is once the sentences' words are in (words not in it are added first, which
        may grow it), their rows (B,T), 0 on padding, and the mask (B,T). Under the lock; the caller reads the tensor
        without it, as its rows in use stay as they are whatever other threads add."""
        distinct = dict.fromkeys(itertools.chain.from_iterable(sentences))
        with self.lock:
            new = [t for t in distinct if t not in self.rows]
            if new and self.size + len(new) > self.capacity:  # full: start again with this batch's words
                self._forget()
                new = list(distinct)
            if new:
                self._add(new)
            rows = self.rows
            return (self.table, *padded([[rows[t] for t in s] for s in sentences]))  # (N,F), (B,T), (B,T)

    def _add(self, words: list[str]) -> None:
        """Compute the features of ``words`` (none of them in the table) in one pass and give each a row; an empty
        table first gets row 0, padding, computed as the graph computes a padding position. A batch with more
        distinct words than ``capacity`` grows the table past it."""
        looked_up = ([] if self.size else [(PAD_ID, [])]) + [self.lookup(w) for w in words]
        type_words = torch.tensor([w for w, _ in looked_up])  # (U,)
        type_chars, _ = padded([c for _, c in looked_up], PAD_ID, min_width=1)  # (U,L)
        feats = self.backend.features(type_words, type_chars)  # (U,F)
        start, need = self.size, self.size + len(looked_up)
        if self.table is None or self.table.shape[0] < need or self.table.dtype != feats.dtype:
            grown = torch.empty(max(need, min(self.capacity, 2 * need)), feats.shape[1], dtype=feats.dtype)
            if self.table is not None and start:
                grown[:start] = self.table[:start]
            self.table = grown
        self.table[start:need] = feats
        self.rows.update(zip(words, range(need - len(words), need)))
        self.size = need
