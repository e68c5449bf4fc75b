from __future__ import annotations

import pytest
import torch

from tagger.data.datamodule import BucketBatchSampler, TaggerDataModule
from tagger.data.readers import ColumnCorpus, ConlluCorpus
from tagger.data.vocab import IGNORE_INDEX, PAD_ID, Vocab


def _dm(tiny_data, **kw):
    corpus = ConlluCorpus(str(tiny_data), {"train": "ud_english_ewt/en_ewt-ud-train.conllu",
                                           "validation": "ud_english_ewt/en_ewt-ud-dev.conllu",
                                           "test": "ud_english_ewt/en_ewt-ud-test.conllu"})
    dm = TaggerDataModule(corpus, "pos", batch_size=8, **kw)
    dm.setup("fit")
    return dm


def test_vocab_from_train_only_and_reused_when_given(tiny_data):
    dm = _dm(tiny_data)
    train_words = {w for s in dm.tokens("train") for w in s}
    assert set(dm.vocab.words[2:]) == {dm.vocab.normalize(w) for w in train_words}
    given = Vocab(dm.vocab.words[:5], dm.vocab.chars, dm.vocab.labels, "pos")
    dm2 = _dm(tiny_data, vocab=given)
    assert dm2.vocab is given  # never rebuilt


def test_batches_are_padded_masked_and_cover_every_sentence_once(tiny_data):
    dm = _dm(tiny_data)
    seen = []
    for batch in dm.train_dataloader():
        B, T = batch["words"].shape
        lengths = batch["mask"].sum(1)
        assert batch["types"].shape == (B, T) and batch["type_chars"].shape[0] == int(batch["types"].max()) + 1
        assert (batch["tags"][~batch["mask"]] == IGNORE_INDEX).all()
        assert (batch["words"][~batch["mask"]] == PAD_ID).all()
        assert (batch["tags"][batch["mask"]] >= 0).all()
        assert lengths.max() == T
        assert all(spans == [(spans[0][0], 0, n)] for spans, n in zip(batch["sentences"], lengths.tolist()))
        assert "starts" not in batch  # one sentence per row: no edges inside rows
        seen += [spans[0][0] for spans in batch["sentences"]]
    assert sorted(seen) == list(range(len(dm.tokens("train"))))


def test_doc_window_packs_consecutive_sentences_of_one_document(tiny_data):
    corpus = ColumnCorpus(str(tiny_data), {"train": "conll2003/eng.train", "validation": "conll2003/eng.testa"})
    dm = TaggerDataModule(corpus, "ner", batch_size=4, doc_window=20)
    dm.setup("fit")
    train = dm.datasets["train"]
    seen = []
    for batch in dm.train_dataloader():
        lengths = batch["mask"].sum(1).tolist()
        for b, spans in enumerate(batch["sentences"]):
            assert lengths[b] <= 20 or len(spans) == 1  # only a sentence longer than the window fills a row alone
            assert len({train[i]["doc"] for i, _, _ in spans}) == 1  # never across documents
            assert [i for i, _, _ in spans] == list(range(spans[0][0], spans[0][0] + len(spans)))  # in order
            assert sum(n for _, _, n in spans) == lengths[b]
            # the CRF's sentence edges: exactly the starts past the row's beginning
            starts = batch["starts"][b] if "starts" in batch else torch.zeros(batch["mask"].shape[1], dtype=torch.bool)
            assert starts.nonzero().flatten().tolist() == [start for _, start, _ in spans[1:]]
            for i, start, n in spans:
                assert batch["tokens"][b][start : start + n] == train[i]["tokens"]
                assert batch["tags"][b, start : start + n].tolist() == train[i]["tags"]
            seen += [i for i, _, _ in spans]
    assert sorted(seen) == list(range(len(train)))  # every sentence once
    assert len(dm.encoded["train"]) < len(train)  # rows do hold several sentences


def test_bad_doc_window_names_the_key(tiny_data):
    with pytest.raises(ValueError, match="data.doc_window"):
        _dm(tiny_data, doc_window=0)


def test_bucketing_groups_similar_lengths_and_is_reproducible():
    lengths = [(i * 37) % 50 + 1 for i in range(400)]
    s = BucketBatchSampler(lengths, batch_size=10, shuffle=True, seed=3, pool=10)
    a = list(s)
    assert a == list(BucketBatchSampler(lengths, batch_size=10, shuffle=True, seed=3, pool=10))
    s.set_epoch(1)
    assert list(s) != a  # a new order every epoch
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in a) / len(a)
    assert spread < 10  # random batches would spread over ~40 lengths
    assert sorted(i for b in a for i in b) == list(range(400))


def test_lightning_gives_the_training_loader_a_new_order_every_epoch(tiny_data):
    # what Lightning's fit loop calls at every epoch start (a private function: this test is its canary)
    from lightning_fabric.utilities.data import _set_sampler_epoch

    loader = _dm(tiny_data).train_dataloader()
    orders = []
    for epoch in range(3):
        _set_sampler_epoch(loader, epoch)
        assert loader.batch_sampler.epoch == epoch
        orders.append([batch["words"].tolist() for batch in loader])
    assert orders[0] != orders[1] != orders[2]


def test_max_train_len_filters_train_only(tiny_data):
    dm = _dm(tiny_data, max_train_len=6)
    assert max(len(s) for s in dm.tokens("train")) <= 6
    assert max(len(s) for s in dm.tokens("test")) > 6


def test_data_options_reach_the_vocabulary_built_from_train(tiny_data):
    dm = _dm(tiny_data, case_fallback=True)
    word = next(w for s in dm.tokens("train") for w in s if w.lower() != w.upper())
    assert dm.vocab.case_fallback and dm.vocab.word_id(word.swapcase()) != dm.vocab.word_id("qqq-never-seen")
    assert sum(dm.vocab.counts) == sum(len(s) for s in dm.tokens("train"))  # min_freq 1: every token counted


def test_a_batch_stays_as_it_is_on_the_cpu_and_moves_to_another_device(tiny_data):
    dm = _dm(tiny_data)
    batch = next(iter(dm.train_dataloader()))
    assert dm.transfer_batch_to_device(batch, torch.device("cpu"), 0) is batch
    moved = dm.transfer_batch_to_device(batch, torch.device("meta"), 0)
    assert moved is not batch and moved["words"].device.type == "meta"
    assert moved["sentences"] == batch["sentences"]  # what is not a tensor travels as it is
