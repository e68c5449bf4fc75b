"""Several heads on one body: each head learns only from its own task's batches (tagger/models/multitask.py)."""
from __future__ import annotations

import json

import pytest
import torch

from tagger.data.encoding import collate, encode_sentence
from tagger.data.vocab import MultiTaskVocab, Vocab
from tagger.models.multitask import MultiTaskTagger, build_model

POS = ["DET", "NOUN", "VERB"]
NER = ["O", "B-PER", "I-PER"]
CONFIG = {"embedder": {"_target_": "tagger.models.embedder.Embedder", "word_dim": 8, "char_dim": 4, "char_filters": 4},
          "model": {"_target_": "tagger.models.bilstm.BiLSTMEncoder", "hidden_dim": 8, "layers": 1},
          "tasks": {"pos": {"head": {"_target_": "tagger.models.heads.SoftmaxHead"}, "weight": 1.0},
                    "ner": {"head": {"_target_": "tagger.models.heads.CRFHead"}, "weight": 1.0}}}


def _vocab() -> Vocab:
    vocab = Vocab.build([["the", "cat", "sees"], ["John", "sees", "Mary"]], POS, "pos")
    return MultiTaskVocab.with_tasks(vocab, {"pos": {"task": "pos", "labels": POS, "tag_scheme": None},
                                            "ner": {"task": "ner", "labels": NER, "tag_scheme": "IOB2"}})


def _batch(vocab: Vocab, task: str) -> dict:
    if task == "pos":
        items = [encode_sentence(vocab, ["the", "cat", "sees"], [0, 1, 2])]
    else:
        items = [encode_sentence(vocab, ["John", "sees", "Mary"], [1, 0, 1])]
    return {**collate(items), "task": task}


def _model(config=CONFIG) -> MultiTaskTagger:
    torch.manual_seed(0)
    return build_model(config, _vocab())


@pytest.mark.parametrize("task, other", [("pos", "ner"), ("ner", "pos")])
def test_a_batch_trains_its_own_head_and_the_body_only(task, other):
    model = _model()
    model.loss(_batch(_vocab(), task)).backward()
    assert all(p.grad is None for p in model.heads[other].parameters())  # not in the graph at all
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.heads[task].parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters())
    assert model.embedder.word.weight.grad is not None


def test_the_task_weight_scales_its_loss():
    weighted = {**CONFIG, "tasks": {**CONFIG["tasks"], "ner": {**CONFIG["tasks"]["ner"], "weight": 0.25}}}
    plain, scaled = _model().eval(), _model(weighted).eval()
    batch = _batch(_vocab(), "ner")
    assert torch.allclose(scaled.loss(batch), 0.25 * plain.loss(batch))
    batch = _batch(_vocab(), "pos")
    assert torch.allclose(scaled.loss(batch), plain.loss(batch))


def test_each_head_has_its_tasks_labels():
    model = _model()
    assert model.heads["pos"].proj.out_features == len(POS)
    assert model.heads["ner"].proj.out_features == len(NER)
    pred, prob = model.eval().predict(_batch(_vocab(), "ner"))  # (B,T)
    assert pred.shape == prob.shape == (1, 3) and int(pred.max()) < len(NER)


def test_a_batch_of_an_unknown_task_names_the_models_tasks():
    with pytest.raises(KeyError, match="pos, ner"):
        _model().loss({**_batch(_vocab(), "pos"), "task": "chunk"})


def test_tasks_of_the_config_and_the_vocabulary_must_agree():
    swapped = {**CONFIG, "tasks": {"ner": CONFIG["tasks"]["ner"], "pos": CONFIG["tasks"]["pos"]}}
    with pytest.raises(ValueError, match="tasks"):
        build_model(swapped, _vocab())


def test_the_vocabulary_keeps_each_tasks_labels_through_saving():
    vocab = _vocab()
    again = Vocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert isinstance(again, MultiTaskVocab) and again.tasks == vocab.tasks and again.words == vocab.words
    ner = again.for_task("ner")
    assert (ner.labels, ner.task, ner.tag_scheme, ner.tasks) == (NER, "ner", "IOB2", None)
    assert ner.word_id("Mary") == again.word_id("Mary") != 1  # the shared word table
    single = Vocab.build([["the", "cat"]], POS, "pos")
    assert "tasks" not in single.to_dict() and single.for_task("pos") is single and single.task_names == ["pos"]
    with pytest.raises(ValueError, match="first task"):
        MultiTaskVocab.with_tasks(single, {"ner": {"task": "ner", "labels": NER, "tag_scheme": "IOB2"}})
