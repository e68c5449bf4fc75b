from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

from tagger.artifacts.checkpoint import CheckpointError, load_checkpoint, read_checkpoint
from tagger.data.encoding import collate, encode_sentence
from tagger.inference.passes import plan_passes
from tagger.inference.predictor import Predictor, encode_batch, windows


def test_windows_cover_everything_with_overlap():
    assert windows(5, 10, 2) == [(0, 5)]
    spans = windows(25, 10, 3)
    assert spans[0] == (0, 10) and spans[-1][1] == 25
    assert all(b - a <= 10 for a, b in spans)
    assert all(spans[i + 1][0] == spans[i][1] - 3 for i in range(len(spans) - 1))
    with pytest.raises(ValueError):
        windows(5, 4, 4)


def test_checkpoint_loads_with_saved_vocab_and_predicts_like_the_run(tiny_pos_run):
    m = json.loads((tiny_pos_run / "metrics.json").read_text())
    loaded = load_checkpoint(m["best_checkpoint"])
    assert loaded.vocab.labels == json.loads((tiny_pos_run / "vocab.json").read_text())["labels"]
    pred = Predictor(loaded.tagger, loaded.vocab).tags([["the", "big", "cat", "sees", "a", "dog", "."]])
    assert pred == [["DET", "ADJ", "NOUN", "VERB", "DET", "NOUN", "PUNCT"]]  # the toy grammar is learnable


def test_batching_and_padding_do_not_change_predictions(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    sents = [["the", "cat", "sees", "a", "tree"], ["a", "red", "car", "likes", "the", "old", "house", "."], ["dog"]]
    one_by_one = [Predictor(loaded.tagger, loaded.vocab).predict([s])[0] for s in sents]
    together = Predictor(loaded.tagger, loaded.vocab, batch_size=3).predict(sents)
    for a, b in zip(one_by_one, together):
        assert [t.tag for t in a] == [t.tag for t in b]
        assert [t.score for t in a] == pytest.approx([t.score for t in b], abs=1e-5)


def test_forward_passes_hold_at_most_batch_size_windows_and_max_tokens_padded_tokens(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    lengths = [3, 40, 1, 9, 3, 120, 8, 2, 9, 30]
    batches = Predictor(loaded.tagger, loaded.vocab, batch_size=4, max_tokens=32)._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # every piece exactly once
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths)  # shortest first, so a batch pads to its own longest piece
    for b in batches:
        assert len(b) <= 4
        assert len(b) * max(lengths[i] for i in b) <= 32 or len(b) == 1  # a longer piece runs alone
    assert [len(b) for b in batches] == [4, 3, 1, 1, 1]  # [1,2,3,3] [8,9,9] [30] [40] [120]


def _plan_cost(plan: list[list[int]], lengths: list[int], pass_cost: int) -> int:
    return sum(pass_cost + len(p) * max(lengths[i] for i in p) for p in plan)


def _least_cost(lengths: list[int], pass_cost: int) -> int:
    """The cheapest cut of the sorted pieces into passes (padded positions + pass_cost each), by trying every cut."""
    ordered = sorted(lengths)
    best = None
    for cuts in itertools.product((False, True), repeat=max(0, len(ordered) - 1)):
        cost, size = 0, 1
        for i, cut in enumerate((*cuts, True)):
            if cut:
                cost, size = cost + pass_cost + size * ordered[i], 1
            else:
                size += 1
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("pass_cost", [0, 5, 64])
def test_passes_cost_the_least_padding_plus_pass_cost_when_no_limit_binds(pass_cost):
    rng = random.Random(pass_cost)
    for _ in range(200):
        lengths = [rng.choice([1, 2, 3, 5, 8, 9, 12, 20, 40, 100]) for _ in range(rng.randint(1, 9))]
        plan = plan_passes(lengths, batch_size=100, max_tokens=None, pass_cost=pass_cost)
        assert sorted(i for p in plan for i in p) == list(range(len(lengths)))
        assert _plan_cost(plan, lengths, pass_cost) == _least_cost(lengths, pass_cost), lengths


def test_a_merged_batch_of_short_and_long_sentences_is_cut_where_padding_costs_more_than_a_pass():
    # eight 3-token sentences and two of 60: padding the short ones to 60 would cost 456 positions
    lengths = [3, 60, 3, 3, 3, 60, 3, 3, 3, 3]
    plan = plan_passes(lengths, batch_size=256, max_tokens=2048, pass_cost=64)
    assert [sorted(lengths[i] for i in p) for p in plan] == [[3] * 8, [60, 60]]
    # nearly equal lengths stay in one pass: 30 pieces of 10-12 tokens pad 30 positions, less than a pass
    assert len(plan_passes([10, 11, 12] * 10, batch_size=256, max_tokens=2048, pass_cost=64)) == 1
    # a free pass: every distinct length apart; a pass dearer than any padding: as few passes as the limits allow
    assert len(plan_passes(lengths, batch_size=256, max_tokens=2048, pass_cost=0)) == 2
    assert len(plan_passes([3, 5, 8, 60], batch_size=256, max_tokens=2048, pass_cost=0)) == 4
    assert len(plan_passes([3, 5, 8, 60], batch_size=256, max_tokens=2048, pass_cost=10**6)) == 1
    assert len(plan_passes([3, 5, 8, 60], batch_size=2, max_tokens=2048, pass_cost=10**6)) == 2
    assert plan_passes([0, 2, 0], batch_size=4, max_tokens=8, pass_cost=64) == [[0, 2, 1]]  # empty pieces pad nothing
    assert plan_passes([], batch_size=4, max_tokens=8, pass_cost=64) == []


def test_predictions_do_not_depend_on_the_token_budget_or_the_word_cache(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    sents = [["the", "cat", "sees", "a", "tree"], ["a", "red", "car", "likes", "the", "old", "house", "."], ["dog"]] * 3
    reference = Predictor(loaded.tagger, loaded.vocab, max_tokens=None, cache_size=0).predict(sents)
    cached = Predictor(loaded.tagger, loaded.vocab, max_tokens=8)
    computed = []  # the words whose features each pass computed
    features = cached.backend.features
    cached.backend.features = lambda w, c: computed.append(len(w)) or features(w, c)
    for _ in range(2):  # the second call reads every word from the cache
        computed.clear()
        out = cached.predict(sents)
        assert [[t.tag for t in s] for s in out] == [[t.tag for t in s] for s in reference]
        assert [t.score for s in out for t in s] == pytest.approx([t.score for s in reference for t in s], abs=1e-5)
    assert computed == []  # nothing computed again
    assert set(cached.words.rows) == {t for s in sents for t in s}


def test_long_input_is_windowed_not_truncated(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    sent = ["the", "cat", "sees", "a", "dog", "."] * 50  # 300 tokens
    whole = Predictor(loaded.tagger, loaded.vocab).predict([sent])[0]
    windowed = Predictor(loaded.tagger, loaded.vocab, window=16, overlap=4).predict([sent])[0]
    assert len(whole) == len(windowed) == 300
    assert all(0.0 < t.score <= 1.0 for t in windowed)
    agree = sum(a.tag == b.tag for a, b in zip(whole, windowed)) / 300
    assert agree > 0.9


def test_truncated_or_foreign_checkpoint_is_a_clear_error(tiny_pos_run, tmp_path):
    good = (tiny_pos_run / "checkpoints" / "best.ckpt").read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="cut.ckpt"):
        load_checkpoint(cut)
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(CheckpointError, match="not a tagger checkpoint"):
        read_checkpoint(other)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.ckpt")


def test_crf_ner_model_never_emits_invalid_iob2(tiny_ner_run):
    m = json.loads((tiny_ner_run / "metrics.json").read_text())
    loaded = load_checkpoint(m["best_checkpoint"])
    assert loaded.vocab.tag_scheme == "IOB2"
    tags = Predictor(loaded.tagger, loaded.vocab).tags([["Anna", "likes", "in", "New", "York", "."], ["York"] * 5])
    for sent in tags:
        prev = "O"
        for t in sent:
            if t.startswith("I-"):
                assert prev != "O" and prev[2:] == t[2:], sent
            prev = t


def test_casing_feature_trains_and_the_checkpoint_predicts_with_the_saved_vocab(tmp_path, tiny_data):
    from tests.conftest import train_tiny

    run = train_tiny(tmp_path, tiny_data, ["data=conll2003", "model=self_attention", "head=crf", "model.d_model=16",
                                           "model.heads=2", "model.ffn_dim=16", "data.lowercase=true",
                                           "embedder.case_dim=4", "trainer.max_epochs=2"])
    loaded = load_checkpoint(run / "checkpoints" / "best.ckpt")
    assert loaded.tagger.embedder.case is not None and loaded.vocab.lowercase
    sent = ["John", "JOHN", "john", "lives", "in", "Paris", "1999"]
    assert len({loaded.vocab.word_id(w) for w in sent[:3]}) == 1  # one vocabulary word, three casings
    predictor = Predictor(loaded.tagger, loaded.vocab)
    pred = predictor.predict([sent])[0]
    assert len(pred) == len(sent) and all(t.tag in loaded.vocab.labels for t in pred)
    # the prediction path (characters once per distinct word) equals the training path on the padded batch
    batch = collate([encode_sentence(loaded.vocab, sent)])
    h_train = loaded.tagger.encode(batch)
    h_infer = predictor.backend(encode_batch(loaded.vocab, [sent]))
    assert torch.allclose(h_train, h_infer, atol=1e-5)


def test_document_context_model_tags_each_document_as_one_stream(tmp_path, tiny_data):
    from tests.conftest import train_tiny

    run = train_tiny(tmp_path, tiny_data, ["data=conll2003", "model=self_attention", "head=crf", "model.d_model=16",
                                           "model.heads=2", "model.ffn_dim=16", "data.doc_window=24",
                                           "model.window=[2,null]", "trainer.max_epochs=2"])
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["config"]["data"]["doc_window"] == 24 and "f1" in metrics["test"]
    loaded = load_checkpoint(run / "checkpoints" / "best.ckpt")
    assert loaded.tagger.doc_window == 24  # saved with the model, not re-read from a config
    assert [b.attn.window for b in loaded.tagger.encoder.blocks] == [2, None]
    doc = [["Anna", "likes", "Rome", "."], ["Mary", "Smith", "sees", "Paris", "."], ["John", "."]]
    p = Predictor(loaded.tagger, loaded.vocab)

    def scores(sents):
        return [[round(t.score, 5) for t in s] for s in sents]

    # the document is one 11-token window: encoded as one stream, the CRF decodes each sentence as its own chain
    batch = encode_batch(loaded.vocab, [[t for s in doc for t in s]])
    starts = torch.zeros(1, 11, dtype=torch.bool)
    starts[0, [4, 9]] = True
    _, prob = loaded.tagger.head.decode(p.backend(batch), batch["mask"], starts)
    stream = [round(x, 5) for x in prob[0].tolist()]
    together = p.predict(doc, docs=["d", "d", "d"])
    assert scores(together) == [stream[:4], stream[4:9], stream[9:]]
    alone = [p.predict([s])[0] for s in doc]
    assert scores(p.predict(doc)) == scores(alone)  # no documents given: each sentence alone
    # only adjacent sentences of one document share context
    assert scores(p.predict(doc, docs=["d", "d", "e"])[2:]) == scores(alone[2:])
    long = p.predict(doc * 6, docs=["d"] * 18)  # 66 tokens: windows of 24 overlapping by 12
    assert [len(s) for s in long] == [len(s) for s in doc * 6]


def test_evaluate_cli_scores_a_run_again_and_writes_it_back(tmp_path, tiny_data):
    import shutil

    from tagger.commands.evaluate import main

    from tests.conftest import train_tiny

    run = train_tiny(tmp_path / "run", tiny_data, ["data=conll2003", "model=window_fc", "head=crf", "trainer.max_epochs=1"])
    before = json.loads((run / "metrics.json").read_text())
    assert main([str(run), "--data-dir", str(tiny_data), "--write"]) == 0
    after = json.loads((run / "metrics.json").read_text())
    # the same checkpoint and prediction code: the same figures, the old ones kept
    assert after["test"]["f1"] == pytest.approx(before["test"]["f1"]) and after["dev"]["f1"] == pytest.approx(before["dev"]["f1"])
    assert after["reevaluated"]["previous"]["test"] == before["test"]["f1"]
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    (broken / "metrics.json").write_text("{")
    assert main([str(broken)]) == 1
