"""tagger.data.encoding: plain sentence -> tensor helpers shared by training and prediction."""
from __future__ import annotations

import pytest
import torch

from tagger.data.encoding import EncodedRows, collate, document_runs, encode_sentence, join, pack, sentence_starts
from tagger.data.vocab import IGNORE_INDEX, Vocab


def test_document_runs_and_pack():
    assert document_runs(None, 3) == [[0], [1], [2]]
    assert document_runs(["a", "a", "b", "a"], 4) == [[0, 1], [2], [3]]  # only adjacent sentences join
    with pytest.raises(ValueError, match="2 document ids for 3 sentences"):
        document_runs(["a", "b"], 3)
    assert pack([3, 4, 5, 30, 2, 2], 10) == [[0, 1], [2], [3], [4, 5]]


def test_long_words_keep_prefix_and_suffix():
    v = Vocab.build([["abc"]], ["X"], "pos")
    item = encode_sentence(v, ["a" * 10 + "b" * 30 + "c" * 10])
    batch = collate([item], max_word_chars=8)
    chars = batch["chars"][0, 0].tolist()
    assert chars == [v.char_ids("a")[0]] * 4 + [v.char_ids("c")[0]] * 4


def test_sentence_starts_mark_edges_past_the_row_start():
    assert sentence_starts([[0], [0]], 4) is None  # one sentence per row: no edges inside rows
    starts = sentence_starts([[0, 2], [0]], 4)
    assert starts.tolist() == [[False, False, True, False], [False, False, False, False]]


def _same_batch(fast: dict, reference: dict) -> None:
    """EncodedRows.collate's batch holds what collate's does, chars as type_chars[types]."""
    assert fast.keys() - {"types", "type_chars"} == reference.keys() - {"chars"}
    for key in ("words", "tags", "mask", "unseen", "starts"):
        if key in reference:
            assert fast[key].dtype == reference[key].dtype and torch.equal(fast[key], reference[key]), key
    assert fast["sentences"] == reference["sentences"] and fast["tokens"] == reference["tokens"]
    assert fast["type_chars"][0].eq(0).all()  # row 0: the empty word, where padding points
    assert torch.equal(fast["type_chars"][fast["types"]], reference["chars"])
    assert len(fast["type_chars"]) == len({t for row in fast["tokens"] for t in row} | {""})  # each word once


@pytest.mark.parametrize("rows", [[[0], [1], [2], [3]], [[0, 1], [2], [3]]], ids=["sentences", "documents"])
def test_encoded_rows_give_the_batches_collate_gives(rows):
    # a word longer than max_word_chars, an unseen one, and an empty token (BTC keeps them): the empty word's row
    train = [["The", "cat", "sat", "."], ["the", "Cat", "ran"], ["A", "", "dog"], ["x" * 50, "cat", "Zebra", "99"]]
    v = Vocab.build(train[:2], ["A", "B", "C"], "pos", lowercase=True)
    tags = [[i % 3 for i in range(len(s))] for s in train]
    tags[2][1] = IGNORE_INDEX  # a tag the model does not know
    items = [encode_sentence(v, s, t) for s, t in zip(train, tags)]
    joined = [join(items, r) for r in rows]
    encoded = EncodedRows(joined, max_word_chars=8)
    assert len(encoded) == len(rows) and encoded.lengths == [len(r["words"]) for r in joined]
    for batch in ([0, 1], [1, 0], list(range(len(rows))), [len(rows) - 1]):  # with and without padding
        _same_batch(encoded.collate(batch), collate([joined[i] for i in batch], max_word_chars=8))
