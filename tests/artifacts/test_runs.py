"""tagger.artifacts.runs: every kind of argument a command takes (run dir, best.json, .ckpt, model store tag),
a clear error for anything else, and the choice of the best run."""
from __future__ import annotations

import json
import shutil

import pytest

from tagger.artifacts import runs
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.artifacts.runs import RunError, best_checkpoint, find_best, is_trained, resolve


def test_sources_run_dir_best_json_and_checkpoint(tmp_path, tiny_pos_run):
    ckpt = tiny_pos_run / "checkpoints" / "best.ckpt"
    assert resolve(tiny_pos_run).checkpoint == ckpt
    via_ckpt = resolve(ckpt)
    assert via_ckpt.run_dir == tiny_pos_run and via_ckpt.metrics["task"] == "pos"
    best = tmp_path / "best.json"
    best.write_text(json.dumps({"run_dir": str(tiny_pos_run), "checkpoint": str(ckpt), "task": "pos",
                                "dev": {"acc": 1.0}, "test": {"acc": 2.0}, "model": "self_attention", "config": {}}))
    src = resolve(best)
    assert src.checkpoint == ckpt and src.metrics["dev"] == json.loads((tiny_pos_run / "metrics.json").read_text())["dev"]
    with pytest.raises(RunError, match="not found"):
        resolve(tmp_path / "missing")
    with pytest.raises(RunError, match="checkpoints/best.ckpt"):
        resolve(tmp_path)


def test_find_best_prefers_best_json_then_highest_dev(tmp_path, tiny_pos_run, tiny_ner_run):
    multirun = tmp_path / "multirun"
    for name, src, acc in (("a", tiny_pos_run, 50.0), ("b", tiny_pos_run, 90.0), ("c", tiny_ner_run, 99.0)):
        shutil.copytree(src, multirun / name)
        metrics = json.loads((multirun / name / "metrics.json").read_text())
        metrics["dev"][metrics["main_metric"]] = acc
        (multirun / name / "metrics.json").write_text(json.dumps(metrics))
    assert find_best("pos", [multirun]) == multirun / "b"
    assert find_best("ner", [multirun]) == multirun / "c"
    assert find_best("pos", [tmp_path / "nothing"]) is None
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "best.json").write_text(json.dumps({"task": "pos", "run_dir": str(multirun / "a")}))
    assert find_best("pos", [reports, multirun]) == reports / "best.json"
    # a best.json from another machine (its run dir is not here) is skipped, not chosen and then failed on
    (reports / "best.json").write_text(json.dumps({"task": "pos", "run_dir": str(tmp_path / "elsewhere" / "run")}))
    assert find_best("pos", [reports, multirun]) == multirun / "b"
    # nor is a best.json that is not JSON (a half-copied file): the search goes on instead of raising
    (reports / "best.json").write_text('{"task": "pos", "run_')
    assert find_best("pos", [reports, multirun]) == multirun / "b"


def test_a_moved_run_dir_finds_its_checkpoint_and_broken_arguments_are_named(tmp_path, tiny_pos_run):
    moved = tmp_path / "moved"
    shutil.copytree(tiny_pos_run, moved)  # metrics.json still names the checkpoint at the old place
    assert best_checkpoint(moved) == moved / "checkpoints" / "best.ckpt" and is_trained(moved)
    assert not is_trained(tmp_path)
    (moved / "metrics.json").write_text("{")
    with pytest.raises(RunError, match="metrics.json: cannot read it as JSON"):
        resolve(moved)
    best = tmp_path / "best.json"
    best.write_text(json.dumps({"task": "pos"}))
    with pytest.raises(RunError, match="'checkpoint' or 'run_dir'"):
        resolve(best)
    with pytest.raises(RunError, match="a run dir, a best.json, a .ckpt file or a model store tag"):
        resolve(tmp_path / "no" / "such" / "run")


def test_a_store_tag_resolves_and_loads_the_packaged_model(store, tiny_pos_run):
    from tagger.artifacts.package import package

    tag = str(package(tiny_pos_run, "tagger-runs").tag)
    for arg in (tag, "tagger-runs:latest"):
        source = resolve(arg)
        assert source.checkpoint is None and source.store_tag == tag and source.metrics["task"] == "pos"
    packaged, trained = runs.load("tagger-runs:latest"), load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    assert packaged.vocab.to_dict() == trained.vocab.to_dict() and packaged.config == trained.config
    for name, value in trained.tagger.state_dict().items():
        assert packaged.tagger.state_dict()[name].equal(value), name
    with pytest.raises(RunError, match="no such model in the BentoML store"):
        resolve("tagger-runs:nosuchversion")
