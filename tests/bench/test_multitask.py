"""bench.multitask times one multi-task model against single-task models in turn (tiny models: figures mean nothing)."""
from __future__ import annotations

import json

import pytest

from bench.multitask import IN_TURN, ONE_MODEL, main


def test_bench_writes_both_sides_and_their_ratio(tiny_multitask_run, tiny_pos_run, tiny_ner_run, tiny_data, tmp_path):
    assert main([str(tiny_multitask_run), str(tiny_pos_run), str(tiny_ner_run), "--data-dir", str(tiny_data),
                 "--out", str(tmp_path), "--repeats", "1", "--backend", "fp32", "--quick"]) == 0
    res = json.loads((tmp_path / "bench_multitask.json").read_text())
    assert res["tasks"] == ["pos", "ner"] and min(res["tokens_per_s"].values()) > 0
    assert res["ratio"] == round(res["tokens_per_s"][ONE_MODEL] / res["tokens_per_s"][IN_TURN], 2)
    assert f"| {IN_TURN} |" in (tmp_path / "bench_multitask.md").read_text()


def test_a_single_task_model_in_the_multitask_place_is_refused(tiny_pos_run, tiny_ner_run, tiny_data, tmp_path):
    with pytest.raises(SystemExit, match="not a model of several tasks"):
        main([str(tiny_pos_run), str(tiny_pos_run), str(tiny_ner_run), "--data-dir", str(tiny_data),
              "--out", str(tmp_path), "--quick"])
