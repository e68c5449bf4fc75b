"""tagger.data.encoding: plain sentence -> tensor helpers shared by training and prediction."""
from __future__ import annotations

import pytest

from tagger.data.encoding import collate, document_runs, encode_sentence, pack, sentence_starts
from tagger.data.vocab import Vocab


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
