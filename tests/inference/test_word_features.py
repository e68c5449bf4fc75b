from __future__ import annotations

import pytest
import torch

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.data.encoding import padded
from tagger.inference.backends import make_predictor
from tagger.inference.predictor import Predictor

SENTS = [["the", "cat", "sees", "a", "tree"], ["a", "red", "car", "likes", "the", "old", "house", "."], ["dog"],
         ["an", "unseen-word", "", "x" * 60], ["the", "big", "dog", "sees", "the", "small", "cat"]]


def _tags_scores(out):
    return [[t.tag for t in s] for s in out], [t.score for s in out for t in s]


def test_padded_scatters_rows_through_their_mask():
    out, mask = padded([[3, 4, 5], [], [7]], pad=-1)
    assert out.tolist() == [[3, 4, 5], [-1, -1, -1], [7, -1, -1]]
    assert mask.tolist() == [[True, True, True], [False, False, False], [True, False, False]]
    empty, empty_mask = padded([[], []])
    assert empty.shape == empty_mask.shape == (2, 0)
    wide, wide_mask = padded([[], []], pad=9, min_width=1)  # a grid of empty words keeps one (padding) column
    assert wide.tolist() == [[9], [9]] and not wide_mask.any()


@pytest.mark.parametrize("capacity", [2**16, 6, 1])
def test_word_features_predict_as_the_full_graph_whatever_the_capacity(tiny_pos_run, capacity):
    """A small table is emptied when full (and a batch with more words than it holds grows it): every call still
    tags as the graph run on each batch from scratch."""
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    reference = _tags_scores(Predictor(loaded.tagger, loaded.vocab, cache_size=0).predict(SENTS))
    cached = Predictor(loaded.tagger, loaded.vocab, cache_size=capacity, batch_size=2)
    assert cached.words is not None
    for order in (SENTS, SENTS[::-1], SENTS):
        tags, scores = _tags_scores(cached.predict(order))
        want_tags, want_scores = _tags_scores(Predictor(loaded.tagger, loaded.vocab, cache_size=0).predict(order))
        assert tags == want_tags
        assert scores == pytest.approx(want_scores, abs=1e-5)
        if capacity == 2**16:
            assert len(cached.words.rows) == len({t for s in SENTS for t in s})
    assert _tags_scores(cached.predict(SENTS))[0] == reference[0]
    if capacity < 2**16:
        assert len(cached.words.rows) <= max(capacity, 2 * 8)  # emptied when full, at most one batch past it


def test_word_features_row_zero_is_the_graphs_padding(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    p = Predictor(loaded.tagger, loaded.vocab)
    p.predict([["the", "cat"]])
    pad = p.graph.features(torch.tensor([0]), torch.zeros(1, 1, dtype=torch.long))  # (1,F)
    assert torch.equal(p.words.table[0], pad[0])
    assert 0 not in p.words.rows.values()


@pytest.mark.parametrize("backend", ["int8", "onnx"])
def test_other_backends_tag_as_fp32_with_or_without_the_table(tiny_pos_run, backend):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    if backend == "onnx":
        pytest.importorskip("onnxruntime")
    p = make_predictor(loaded.tagger, loaded.vocab, backend)
    assert (p.words is not None) == (backend == "int8")  # ONNX runs the whole graph: it keeps ids and characters
    ref = Predictor(loaded.tagger, loaded.vocab, cache_size=0).tags(SENTS)
    assert p.tags(SENTS) == ref
    p.forget_words()
    assert p.tags(SENTS) == ref


@pytest.mark.parametrize("captured", [False, True])
def test_threads_sharing_a_predictor_get_the_tags_of_their_own_sentences(tiny_pos_run, captured):
    """A table emptied on every batch (capacity 1) while four threads tag: no thread reads another's rows; with the
    encoder captured as TorchScript (tagger.inference.capture), four threads also run its one module at once."""
    from concurrent.futures import ThreadPoolExecutor

    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    p = (make_predictor(loaded.tagger, loaded.vocab, "fp32", cache_size=1, batch_size=1) if captured
         else Predictor(loaded.tagger, loaded.vocab, cache_size=1, batch_size=1))
    inputs = [SENTS[i:] + SENTS[:i] for i in range(len(SENTS))] * 4
    want = [Predictor(loaded.tagger, loaded.vocab, cache_size=0).tags(s) for s in inputs]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(p.tags, inputs)) == want


def test_a_table_handed_to_a_pass_keeps_its_rows_while_other_calls_forget_and_grow(tiny_pos_run):
    """A pass reads its table without the lock: forgetting and growing must leave the rows it was handed as they were."""
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    p = Predictor(loaded.tagger, loaded.vocab, cache_size=8)
    handed = []
    p.words.tag(SENTS[:1], lambda table, ids: handed.append((table, ids, table[ids].clone())))
    table, ids, rows = handed[0]
    p.words.tag(SENTS[1:2], lambda table, ids: None)  # 8 more words: past capacity, the table is forgotten
    assert p.words.table is not table
    p.words.clear()
    assert p.words.table is None
    p.words.tag(SENTS[1:], lambda table, ids: None)
    assert torch.equal(table[ids], rows)
