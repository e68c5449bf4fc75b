"""A tiny run of two tasks end to end: per-task dev metrics, the combined selection score, the checkpoint's plain
data, one call that returns every task's tags from one encoder pass, and the config errors that name their key."""
from __future__ import annotations

import csv
import json

import pytest
import torch

import tagger
from tagger.artifacts.checkpoint import CHECKPOINT_KEY, load_checkpoint, read_checkpoint
from tagger.inference.predictor import Predictor
from tests.conftest import MULTITASK, best_checkpoint_state, compose, train_tiny_tasks

SENTENCES = [["John", "sees", "the", "big", "cat", "in", "New", "York", "."], ["Mary", "Smith", "likes", "a", "tree"]]


def test_a_run_records_each_tasks_dev_metrics_and_their_mean(tiny_multitask_run):
    metrics = json.loads((tiny_multitask_run / "metrics.json").read_text())
    assert metrics["task"] == "multitask" and metrics["tasks"] == {"pos": "pos", "ner": "ner"}
    assert metrics["main_metric"] == "tasks_mean"
    for split in ("dev", "test"):
        scores = metrics[split]
        assert 0 <= scores["pos"]["acc"] <= 100 and 0 <= scores["ner"]["f1"] <= 100
        assert scores["tasks_mean"] == pytest.approx((scores["pos"]["acc"] + scores["ner"]["f1"]) / 2)
    # every epoch logged each task's dev score and the monitored combination
    (log,) = tiny_multitask_run.glob("csv/**/metrics.csv")
    rows = [r for r in csv.DictReader(log.open()) if r.get("val/tasks_mean")]
    assert rows and all(r["val/pos/acc"] and r["val/ner/f1"] for r in rows)
    for r in rows:
        assert float(r["val/tasks_mean"]) == pytest.approx((float(r["val/pos/acc"]) + float(r["val/ner/f1"])) / 2)
    # the best checkpoint is the epoch of the highest combined dev score
    best = read_checkpoint(tiny_multitask_run / "checkpoints" / "best.ckpt")
    state = best_checkpoint_state(best)
    assert state["monitor"] == "val/tasks_mean"
    assert float(state["best_model_score"]) == pytest.approx(max(float(r["val/tasks_mean"]) for r in rows), abs=1e-4)


def test_the_checkpoint_holds_each_tasks_labels_as_plain_data(tiny_multitask_run):
    saved = read_checkpoint(tiny_multitask_run / "checkpoints" / "best.ckpt")[CHECKPOINT_KEY]  # weights_only load
    tasks = saved["vocab"]["tasks"]
    assert list(tasks) == ["pos", "ner"] and type(tasks["pos"]["labels"]) is list
    assert "NOUN" in tasks["pos"]["labels"] and "B-LOC" in tasks["ner"]["labels"]
    assert set(saved["config"]["tasks"]) == {"pos", "ner"} and "head" not in saved["config"]
    assert json.loads((tiny_multitask_run / "vocab.json").read_text())["tasks"] == tasks


def test_one_call_returns_a_upos_tag_and_an_entity_tag_per_token(tiny_multitask_run):
    nlp = tagger.load(tiny_multitask_run)
    assert nlp.tasks == ["pos", "ner"]
    for sentence, tokens in zip(nlp(SENTENCES), SENTENCES):
        pos, ner = sentence.tasks["pos"], sentence.tasks["ner"]
        assert len(pos.tags) == len(ner.tags) == len(tokens)
        assert set(pos.tags) <= set(nlp.task_labels("pos")) and set(ner.tags) <= set(nlp.task_labels("ner"))
        assert pos.spans is None and ner.spans is not None
        assert sentence.tags == pos.tags and sentence.spans == ner.spans  # the first task's, the entity task's
    (text,) = nlp(["John sees the cat in Paris."])
    assert text[0].offsets and text[0].tasks["ner"].tags


def test_one_encoder_pass_feeds_every_head(tiny_multitask_run):
    loaded = load_checkpoint(tiny_multitask_run / "checkpoints" / "best.ckpt")
    model = loaded.tagger
    calls = {"encoder": 0, "pos": 0, "ner": 0}

    def count(name):
        def hook(*_):
            calls[name] += 1
        return hook

    handles = [model.encoder.register_forward_hook(count("encoder"))]
    handles += [model.heads[name].proj.register_forward_hook(count(name)) for name in ("pos", "ner")]
    try:
        by_task = Predictor(model, loaded.vocab, cache_size=0).predict_tasks(SENTENCES)
    finally:
        for h in handles:
            h.remove()
    assert calls["encoder"] == 1 and calls["pos"] >= 1 and calls["ner"] >= 1
    # what the training-time model predicts for each task from the same encoder output
    from tagger.data.encoding import collate, encode_sentence

    for name in ("pos", "ner"):
        view = loaded.vocab.for_task(name)
        batch = collate([encode_sentence(view, s) for s in SENTENCES])
        with torch.no_grad():
            pred, _ = model.predict({**batch, "task": name})
            assert torch.equal(model.tags({**batch, "task": name}), pred)  # what validation scores
        assert [[t.tag for t in s] for s in by_task[name]] == \
            [[view.labels[i] for i in row[: len(s)]] for row, s in zip(pred.tolist(), SENTENCES)]


@pytest.mark.parametrize("backend", ["int8", "fp32", "onnx"])
def test_the_backends_run_every_head(tiny_multitask_run, backend):
    from tagger.inference.backends import DEFAULT_BACKEND

    assert DEFAULT_BACKEND in ("int8", "fp32")  # the default backend is among those held to it here
    reference = tagger.load(tiny_multitask_run, backend="fp32")(SENTENCES)
    got = tagger.load(tiny_multitask_run, backend=backend)(SENTENCES)
    for a, b in zip(reference, got):
        assert set(b.tasks) == {"pos", "ner"}
        if backend != "int8":  # int8 rounds activations; its tags may differ where the model is unsure
            assert a.tasks["pos"].tags == b.tasks["pos"].tags and a.tasks["ner"].tags == b.tasks["ner"].tags


@pytest.mark.parametrize("override, key", [("tasks.ner.weight=0", "tasks.ner.weight"),
                                           ("tasks.pos.weight=-1", "tasks.pos.weight"),
                                           ("data.temperature=0", "data.temperature"),
                                           ("aux=masked_words", "aux")])
def test_a_bad_multitask_config_value_names_its_key(tmp_path, tiny_data, override, key):
    with pytest.raises(Exception, match=key.replace(".", r"\.")):
        train_tiny_tasks(tmp_path, tiny_data, [override, "trainer.max_epochs=1"])


def test_the_multitask_experiment_composes_with_the_chosen_settings(tmp_path, tiny_data):
    cfg = compose([f"data_dir={tiny_data}", "experiment=multitask"], tmp_path)
    assert list(cfg.tasks) == ["pos", "ner"]
    assert cfg.tasks.pos.head._target_.endswith("SoftmaxHead") and cfg.tasks.ner.head._target_.endswith("CRFHead")
    assert cfg.tasks.pos.data.task == "pos" and cfg.tasks.ner.data.task == "ner"
    assert cfg.monitor == "val/tasks_mean" and cfg.get("head") is None
    assert cfg.model.window == 3 and cfg.embedder.vectors  # self_attention_ner with GloVe
    assert cfg.data.tokenizer in ("ud", "conll")


def test_a_single_task_run_keeps_its_files(tiny_pos_run):
    """A model of one task is saved as it is without multi-task code: no tasks entry anywhere."""
    assert "tasks" not in json.loads((tiny_pos_run / "vocab.json").read_text())
    assert "tasks" not in json.loads((tiny_pos_run / "metrics.json").read_text())
    saved = read_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")[CHECKPOINT_KEY]
    assert "tasks" not in saved["vocab"] and "head" in saved["config"]
    assert tagger.load(tiny_pos_run)([["the", "cat"]])[0].tasks is None
