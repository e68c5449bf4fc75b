"""Packaging into the BentoML model store: contents, provenance, loading back, atomicity, corruption."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import bentoml
import pytest
import torch

from tagger.artifacts import package as pkg
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.artifacts.packaged import load_packaged, load_parts
from tagger.inference.predictor import Predictor

torch.set_num_threads(1)


def versions(name: str) -> list[str]:
    try:
        return sorted(str(m.tag) for m in bentoml.models.list(name))
    except bentoml.exceptions.NotFound:
        return []


def test_package_contents_are_plain_data(store, tiny_pos_run):
    model = pkg.package(tiny_pos_run, "tagger-pos")
    folder = Path(model.path)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [pkg.WEIGHTS, pkg.VOCAB, pkg.MODEL_CONFIG, pkg.RUN_INFO, "model.yaml"])  # no pickle anywhere
    from safetensors.torch import load_file

    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    weights = load_file(str(folder / pkg.WEIGHTS))
    assert set(weights) == set(loaded.tagger.state_dict())
    assert json.loads((folder / pkg.VOCAB).read_text()) == loaded.vocab.to_dict()  # saved labels, not rebuilt
    assert json.loads((folder / pkg.MODEL_CONFIG).read_text()) == loaded.config
    assert json.loads((folder / pkg.RUN_INFO).read_text())["task"] == "pos"


def test_metadata_records_provenance(store, tiny_pos_run, tiny_data):
    meta = pkg.package(tiny_pos_run, "tagger-pos").info.metadata
    metrics = json.loads((tiny_pos_run / "metrics.json").read_text())
    assert meta["task"] == "pos" and meta["labels"] == load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt").vocab.labels
    assert meta["dev"]["acc"] == metrics["dev"]["acc"] and meta["test"]["acc"] == metrics["test"]["acc"]
    assert meta["main_metric"] == "acc" and meta["supports_attention"] is True
    train = tiny_data / "ud_english_ewt" / "en_ewt-ud-train.conllu"
    assert meta["data_files"]["train"] == {"path": str(train.resolve()), "sha256": hashlib.sha256(train.read_bytes()).hexdigest()}
    assert set(meta["data_files"]) == {"train", "validation", "test"}
    assert "commit" in meta["git"]  # None outside a git checkout, a sha inside one
    assert meta["weights_sha256"] == hashlib.sha256((Path(bentoml.models.get("tagger-pos:latest").path)
                                                     / pkg.WEIGHTS).read_bytes()).hexdigest()


def test_loaded_package_predicts_like_the_checkpoint(store, tiny_ner_run):
    pkg.package(tiny_ner_run, "tagger-ner")
    packaged = load_packaged(bentoml.models.get("tagger-ner:latest"))
    loaded = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    sentences = [["John", "finds", "in", "New", "York", "."], ["Mary", "Smith", "eats"], ["unseen", "words", "here"]]
    a, b = Predictor(packaged.tagger, packaged.vocab).predict(sentences), Predictor(loaded.tagger, loaded.vocab).predict(sentences)
    assert [[p.tag for p in s] for s in a] == [[p.tag for p in s] for s in b]
    assert [p.score for s in a for p in s] == pytest.approx([p.score for s in b for p in s], abs=1e-6)
    assert packaged.vocab.tag_scheme == "IOB2" and packaged.metadata["task"] == "ner"


def test_failure_inside_create_leaves_store_and_latest_unchanged(store, tiny_pos_run, monkeypatch):
    first = pkg.package(tiny_pos_run, "tagger-pos")
    latest = (store / "models" / "tagger-pos" / "latest").read_text()

    def boom(*args, **kwargs):
        raise RuntimeError("simulated crash while writing the package")

    for stage in ("write_parts", "_check_same_predictions"):
        with monkeypatch.context() as m:
            m.setattr(pkg, stage, boom)
            with pytest.raises(RuntimeError, match="simulated crash"):
                pkg.package(tiny_pos_run, "tagger-pos")
        assert versions("tagger-pos") == [str(first.tag)]
        assert (store / "models" / "tagger-pos" / "latest").read_text() == latest

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(pkg, "_check_same_predictions", interrupt)
        with pytest.raises(KeyboardInterrupt):
            pkg.package(tiny_pos_run, "tagger-pos")
    assert versions("tagger-pos") == [str(first.tag)]
    assert bentoml.models.get("tagger-pos:latest").tag == first.tag


def test_packaging_that_predicts_differently_is_refused(store, tiny_pos_run, monkeypatch):
    real = pkg.load_packaged

    def tampered(model):
        packaged = real(model)
        with torch.no_grad():
            packaged.tagger.head.proj.bias += torch.arange(len(packaged.vocab.labels), dtype=torch.float) * 100
        return packaged

    monkeypatch.setattr(pkg, "load_packaged", tampered)
    with pytest.raises(pkg.PackageError, match="predict differently"):
        pkg.package(tiny_pos_run, "tagger-pos")
    assert versions("tagger-pos") == []


@pytest.mark.parametrize("damage", ["flip_weights", "truncate_weights", "drop_vocab", "relabel", "format"])
def test_corrupted_store_entry_is_a_clear_error(store, tiny_pos_run, damage):
    model = pkg.package(tiny_pos_run, "tagger-pos")
    folder, meta = Path(model.path), dict(model.info.metadata)
    weights = folder / pkg.WEIGHTS
    if damage == "flip_weights":
        data = bytearray(weights.read_bytes())
        data[-5] ^= 0xFF
        weights.write_bytes(bytes(data))
        match = "sha256"
    elif damage == "truncate_weights":
        weights.write_bytes(weights.read_bytes()[:100])
        match = "sha256"
    elif damage == "drop_vocab":
        (folder / pkg.VOCAB).unlink()
        match = "vocab.json is missing"
    elif damage == "relabel":
        meta["labels"] = ["X", "Y"]
        match = "labels"
    else:
        meta["format"] = 99
        match = "format 99"
    with pytest.raises(pkg.PackageError, match=match):
        load_parts(folder, meta, str(model.tag))
