"""bench.ab times two checkouts against each other, taking turns (here the project against itself on a tiny model)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ab import main

ROOT = Path(__file__).resolve().parents[2]


def test_ab_tag_alternates_fresh_processes_and_writes_the_ratio(tiny_pos_run, tiny_data, tmp_path):
    out = tmp_path / "ab.json"
    assert main([str(ROOT), str(ROOT), "tag", str(tiny_pos_run), "--rounds", "2", "--repeats", "1",
                 "--data-dir", str(tiny_data), "--backend", "fp32", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [len(res["samples"][side]) for side in ("a", "b")] == [2, 2]
    assert all(s["tokens_per_s"] > 0 and len(s["pass_seconds"]) == 1 for side in "ab" for s in res["samples"][side])
    assert res["b_over_a"] == round(res["median"]["b"] / res["median"]["a"], 3)
    assert res["checkouts"]["a"]["commit"] == res["checkouts"]["b"]["commit"] != ""
    assert f"b / a = **{res['b_over_a']}**" in out.with_suffix(".md").read_text()


def test_ab_names_the_checkout_whose_process_failed(tiny_data, tmp_path):
    with pytest.raises(RuntimeError, match=str(ROOT)):
        main([str(ROOT), str(ROOT), "tag", str(tmp_path / "no-such-run"), "--rounds", "1",
              "--data-dir", str(tiny_data)])
