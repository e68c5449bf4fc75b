"""Plain encoding of sentences into padded tensors, shared by training (the DataModule) and prediction.

No Lightning here: the predictor and the service import this module, and neither needs a trainer.
"""
from __future__ import annotations

import array
import itertools
from functools import partial
from typing import Any, Hashable, Sequence

import torch

from tagger.data.vocab import IGNORE_INDEX, PAD_ID, Vocab


def padded(rows: list[list[int]], pad: int = 0, min_width: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ints -> ((len(rows), width) long tensor right-padded with ``pad``, (len(rows), width) bool mask of the
    real entries), width the longest row's length (at least ``min_width``). Both are laid out in Python buffers and
    each becomes a tensor in one call: ``torch.tensor`` on nested lists converts element by element, and in the
    service, beside a busy event loop, every torch call of a model pass waits for its thread to run again, so a pass
    should make as few as it can (docs/reference.md, "Evaluation, prediction, export")."""
    B = len(rows)
    width = max([min_width, *map(len, rows)])
    if not B or not width:
        return torch.full((B, width), pad, dtype=torch.long), torch.zeros((B, width), dtype=torch.bool)
    flat, fill = array.array("q"), array.array("q", [pad]) * width
    for row in rows:
        flat.extend(row)
        flat.extend(fill[: width - len(row)])
    real = bytearray(b"".join(b"\x01" * len(row) + b"\x00" * (width - len(row)) for row in rows))
    return (torch.frombuffer(flat, dtype=torch.long).view(B, width),  # (B,T)
            torch.frombuffer(real, dtype=torch.bool).view(B, width))  # (B,T)


def document_runs(docs: Sequence[Hashable] | None, n: int) -> list[list[int]]:
    """Sentence indices 0..n-1 grouped into runs of adjacent sentences of one document, in order.

    ``docs`` holds the document of each sentence (None: every sentence is a document of its own).
    Only adjacent sentences join: a document id that comes back later starts a new run.
    """
    if docs is None:
        return [[i] for i in range(n)]
    if len(docs) != n:
        raise ValueError(f"got {len(docs)} document ids for {n} sentences")
    runs: list[list[int]] = []
    for i, doc in enumerate(docs):
        if runs and docs[runs[-1][-1]] == doc:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def split_docs(split: Any) -> list[str] | None:
    """The ``doc`` column of a ``datasets.Dataset`` split (None where a corpus gives none: sentences alone)."""
    return split["doc"] if "doc" in split.column_names else None


def pack(lengths: list[int], size: int) -> list[list[int]]:
    """Positions 0..len(lengths)-1 of consecutive sentences grouped greedily into rows of at most
    ``size`` tokens. A sentence longer than ``size`` is a row of its own (never cut)."""
    rows: list[list[int]] = []
    used = 0
    for i, n in enumerate(lengths):
        if rows and used + n <= size:
            rows[-1].append(i)
            used += n
        else:
            rows.append([i])
            used = n
    return rows


def encode_sentence(vocab: Vocab, tokens: list[str], tags: list[int] | None = None) -> dict[str, Any]:
    return {
        "words": [vocab.word_id(t) for t in tokens],
        "chars": [vocab.char_ids(t) for t in tokens],
        "tags": tags if tags is not None else [IGNORE_INDEX] * len(tokens),
        "unseen": [vocab.is_unseen(t) for t in tokens],
        "tokens": tokens,
    }


def clip_word(chars: list[int], max_word_chars: int) -> list[int]:
    """A word's character ids, its first and last ``max_word_chars // 2`` when it is longer."""
    if len(chars) <= max_word_chars:
        return chars
    half = max_word_chars // 2
    return chars[:half] + chars[-half:]


def sentence_starts(offsets: list[list[int]], width: int) -> torch.Tensor | None:
    """Per row, where its sentences start -> (len(offsets), width) bool, True at every start past 0 (what
    the CRF treats as a sentence edge); None when no row holds more than one sentence."""
    if all(o <= 0 for row in offsets for o in row):
        return None
    starts = torch.zeros((len(offsets), width), dtype=torch.bool)
    for b, row in enumerate(offsets):
        starts[b, [o for o in row if o > 0]] = True
    return starts


def collate(items: list[dict[str, Any]], max_word_chars: int = 40) -> dict[str, torch.Tensor]:
    """Pad a list of encoded sentences.

    Returns words (B,T), chars (B,T,L), tags (B,T) with IGNORE_INDEX on padding, mask (B,T) bool,
    unseen (B,T) bool, tokens (the strings), and sentences: per row, the (index in the split, start,
    length) of each sentence it holds (one (index, 0, n) for a sentence row; several for a row packed
    from a document), and then also starts (B,T) bool, True where a sentence starts past a row's beginning.
    Words longer than ``max_word_chars`` keep their first and last ``max_word_chars // 2``
    characters (prefix and suffix carry the signal; a 300-character URL would otherwise set L).
    """
    B = len(items)
    T = max(len(it["words"]) for it in items)
    clip = partial(clip_word, max_word_chars=max_word_chars)
    L = max(1, max(len(clip(c)) for it in items for c in it["chars"]))
    words = torch.full((B, T), PAD_ID, dtype=torch.long)
    tags = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    chars = torch.full((B, T, L), PAD_ID, dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.bool)
    unseen = torch.zeros((B, T), dtype=torch.bool)
    for b, it in enumerate(items):
        n = len(it["words"])
        words[b, :n] = torch.tensor(it["words"])
        tags[b, :n] = torch.tensor(it["tags"])
        mask[b, :n] = True
        unseen[b, :n] = torch.tensor(it["unseen"])
        for t, c in enumerate(it["chars"]):
            c = clip(c)
            chars[b, t, : len(c)] = torch.tensor(c, dtype=torch.long)
    sentences = [it.get("sentences", [(-1, 0, len(it["words"]))]) for it in items]
    batch = {"words": words, "chars": chars, "tags": tags, "mask": mask, "unseen": unseen, "sentences": sentences,
             "tokens": [it["tokens"] for it in items]}
    starts = sentence_starts([[start for _, start, _ in row] for row in sentences], T)
    if starts is not None:
        batch["starts"] = starts
    return batch


def join(items: list[dict[str, Any]], indices: list[int]) -> dict[str, Any]:
    """One row of consecutive encoded sentences (``items[i]`` for i in ``indices``), with their spans."""
    row: dict[str, Any] = {"words": [], "chars": [], "tags": [], "unseen": [], "tokens": [], "sentences": []}
    for i in indices:
        it = items[i]
        row["sentences"] += [(i, len(row["words"]), len(it["words"]))]
        for key in ("words", "chars", "tags", "unseen", "tokens"):
            row[key] += it[key]
    return row
