"""make bench's backend comparison runs end to end on a tiny model (its figures mean nothing at this size)."""
from __future__ import annotations

import json

from bench.backends import EAGER, check_targets, main
from tagger.inference.backends import BACKENDS, DEFAULT_BACKEND, bf16_native


def test_bench_writes_every_backend_and_picks_one_within_the_accuracy_rule(tiny_pos_run, tiny_data, tmp_path):
    assert main([str(tiny_pos_run), "--data-dir", str(tiny_data), "--out", str(tmp_path), "--quick",
                 "--repeats", "1", "--no-peer"]) == 0
    res = json.loads((tmp_path / "bench.json").read_text())
    ran = {r["backend"]: r for r in res["backends"] if "error" not in r}
    eager = EAGER.format(DEFAULT_BACKEND)  # the default backend with its encoder not captured
    assert set(ran) == set(BACKENDS) - (set() if bf16_native() else {"bf16"}) | {eager}
    assert [ran[eager][k] for k in ("dev_acc", "test_acc")] == [ran[DEFAULT_BACKEND][k] for k in ("dev_acc", "test_acc")]
    assert all(r["cold_tokens_per_s"] > 0 for r in ran.values())  # a pass with the word cache emptied
    # 2 threads: passes two side by side by default, and each predictor timed with one stream as well
    assert all(r["streams"] == 2 and r["one_stream_tokens_per_s"] > 0 for r in ran.values())
    assert all(set(r["small_calls"]) == {"1", "16"} and min(r["small_calls"].values()) > 0 for r in ran.values())
    assert res["small_call_sentences"] > 0
    chosen = ran[res["chosen_default"]]
    assert chosen["dev_acc"] >= ran["fp32"]["dev_acc"] - res["max_accuracy_loss"]
    assert res["chosen_default"] in BACKENDS
    assert all(chosen["tokens_per_s"] >= r["tokens_per_s"] for name, r in ran.items()
               if name in BACKENDS and r["dev_acc"] >= ran["fp32"]["dev_acc"] - res["max_accuracy_loss"])
    report = (tmp_path / "bench.md").read_text()
    assert all(f"| {name} |" in report for name in ran) and str(tmp_path) not in report
    assert "| tokens/s | vs fp32 | tokens/s, 1 stream |" in report
    assert "| tokens/s, 1 sentence per call | tokens/s, 16 sentences per call |" in report
    fp32_row = next(line for line in report.splitlines() if line.startswith("| fp32 |"))
    assert fp32_row.endswith(f"| {ran['fp32']['small_calls']['1']:,} | {ran['fp32']['small_calls']['16']:,} |")
    # without the peers and the HTTP section, only the in-process target is checked
    assert [t["target"] for t in check_targets(res)][:1] == [
        "in-process tokens/s of the fastest backend within 0.05 accuracy points of fp32"]
