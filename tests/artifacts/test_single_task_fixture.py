"""A single-task model saved in the committed format keeps loading, evaluating and serving.

``tests/fixtures/single_task_ner.ckpt`` is a tiny self-attention + CRF NER checkpoint written by
``tests/fixtures/write_single_task_model.py`` and committed as it was written: the code that reads checkpoints may
change, the file does not."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import tagger
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.commands.evaluate import main as evaluate_main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "single_task_ner.ckpt"
SENTENCE = ["Peter", "Blackburn", "visited", "Germany", "."]


def test_the_committed_checkpoint_loads_as_a_single_task_ner_model():
    loaded = load_checkpoint(FIXTURE)
    assert loaded.vocab.task == "ner" and "O" in loaded.vocab.labels
    assert any(label.startswith(("B-", "I-")) for label in loaded.vocab.labels)
    nlp = tagger.load(FIXTURE)
    (sentence,) = nlp.tag([SENTENCE])
    assert sentence.tokens == SENTENCE and len(sentence.tags) == len(SENTENCE)
    assert set(sentence.tags) <= set(loaded.vocab.labels) and sentence.spans is not None


def test_the_committed_checkpoint_evaluates_on_a_column_file(tmp_path, tiny_data):
    out = tmp_path / "scores.json"
    assert evaluate_main([str(FIXTURE), "--input", str(tiny_data / "conll2003" / "eng.testb"), "--format", "conll",
                          "--scheme", "IOB1", "--output", str(out)]) == 0
    scores = json.loads(out.read_text())
    assert scores["task"] == "ner" and 0 <= scores["metrics"]["f1"] <= 100


def test_the_committed_checkpoint_packages_and_serves(tmp_path):
    from tests.serve.conftest import package_into, start, stop, wait_ready

    tag = package_into(tmp_path, FIXTURE, "tagger-single")
    server = start(tmp_path, tag, "single")
    try:
        wait_ready(server)
        answer = server.post("/tag", json={"sentences": [SENTENCE]})
        assert answer.status_code == 200, answer.text
        offline = tagger.load(FIXTURE).tag([SENTENCE])[0]
        assert [t["tag"] for t in answer.json()["results"][0]["tokens"]] == offline.tags
        assert server.post("/entities", json={"sentences": [SENTENCE]}).status_code == 200
        assert server.get("/model").json()["task"] == "ner"
    finally:
        stop(server)
