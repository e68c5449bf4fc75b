"""Plain encoding of sentences into padded tensors, shared by training (the DataModule) and prediction.

No Lightning here: the predictor and the service import this module, and neither needs a trainer.
"""
from __future__ import annotations

import array
import itertools
from functools import partial
from typing import Any, Hashable, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

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


class EncodedRows(torch.utils.data.Dataset):
    """The rows of a split (encoded sentences, or rows :func:`join` made) held as tensors, so that a batch
    (:meth:`collate`) is a few tensor calls: :func:`collate` builds one from lists token by token, every step.

    Each row's word ids, tags and unseen flags are a tensor (n,); its tokens are ids into a table of the split's
    distinct tokens, whose clipped character ids are laid out once (``type_chars`` (N,max_word_chars), row 0 the empty
    word). A batch carries each distinct word's characters once, the form the embedder reads
    (:meth:`tagger.models.embedder.Embedder.forward` with ``types``) and the predictor's ``encode_batch`` gives too.

    A DataLoader reads it with a batch sampler and ``collate_fn=rows.collate``: an item is its own index, and the
    batch is cut from the tensors held here.
    """

    def __init__(self, items: list[dict[str, Any]], max_word_chars: int = 40):
        index: dict[str, int] = {"": 0}  # the empty word: padding positions, and row 0 of every batch's type_chars
        chars: list[list[int]] = [[]]
        for it in items:
            for token, c in zip(it["tokens"], it["chars"]):
                if token not in index:
                    index[token] = len(chars)
                    chars.append(clip_word(c, max_word_chars))
        self.type_chars, _ = padded(chars, PAD_ID, min_width=1)  # (N,L_max)
        self.type_lengths = torch.tensor([len(c) for c in chars])  # (N,)
        self.words = [torch.tensor(it["words"], dtype=torch.long) for it in items]  # each (n,)
        self.tags = [torch.tensor(it["tags"], dtype=torch.long) for it in items]  # each (n,)
        self.unseen = [torch.tensor(it["unseen"], dtype=torch.bool) for it in items]  # each (n,)
        self.types = [torch.tensor([index[t] for t in it["tokens"]], dtype=torch.long) for it in items]  # each (n,)
        self.tokens = [it["tokens"] for it in items]
        self.sentences = [it.get("sentences", [(-1, 0, len(it["words"]))]) for it in items]
        self.lengths = [len(it["words"]) for it in items]

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> int:
        return i

    def collate(self, indices: list[int]) -> dict[str, Any]:
        """Rows -> the batch :func:`collate` gives for them, with ``types`` (B,T) and ``type_chars`` (U,L) in place of
        chars (B,T,L): ``type_chars[types]`` equals collate's ``chars``. Row 0 of ``type_chars`` is the empty word,
        which padding positions point to."""
        B = len(indices)
        lengths = torch.tensor([self.lengths[i] for i in indices])  # (B,)
        T = int(lengths.max())
        words = pad_sequence([self.words[i] for i in indices], batch_first=True, padding_value=PAD_ID)  # (B,T)
        tags = pad_sequence([self.tags[i] for i in indices], batch_first=True, padding_value=IGNORE_INDEX)  # (B,T)
        unseen = pad_sequence([self.unseen[i] for i in indices], batch_first=True, padding_value=False)  # (B,T)
        split_types = pad_sequence([self.types[i] for i in indices], batch_first=True, padding_value=0)  # (B,T)
        # the batch's distinct words in table order; a leading 0 keeps the empty word in row 0 even without padding
        present, types = torch.unique(torch.cat([split_types.new_zeros(1), split_types.flatten()]),
                                      return_inverse=True)  # (U,), (1+B*T,)
        L = max(1, int(self.type_lengths[present].max()))
        sentences = [self.sentences[i] for i in indices]
        batch = {"words": words, "types": types[1:].view(B, T), "type_chars": self.type_chars[present, :L],  # (U,L)
                 "tags": tags, "mask": torch.arange(T) < lengths.unsqueeze(1), "unseen": unseen,  # (B,T) each
                 "sentences": sentences, "tokens": [self.tokens[i] for i in indices]}
        starts = sentence_starts([[start for _, start, _ in row] for row in sentences], T)
        if starts is not None:
            batch["starts"] = starts
        return batch
