"""trainer=ddp_cpu: 2 processes with gloo train the same model to the same metric as 1 process.

Run through ``python -m tagger.train`` in a subprocess, as a user would: Lightning's DDP launcher
re-executes that command for rank 1, with Hydra's run dir set to rank 0's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import best_checkpoint_state

REPO = Path(__file__).resolve().parents[1]
TINY = ["model=self_attention", "model.d_model=32", "model.heads=2", "model.ffn_dim=32", "trainer.max_epochs=8",
        "threads=1", "~callbacks.progress_bar", "+trainer.enable_progress_bar=false"]


def _train(tmp_path: Path, data_dir: Path, name: str, overrides: list[str]) -> tuple[Path, str]:
    run_dir = tmp_path / name
    cwd = tmp_path / f"{name}_cwd"  # an empty working dir: any stray file a rank writes shows up here
    cwd.mkdir()
    r = subprocess.run([sys.executable, "-m", "tagger.train", f"data_dir={data_dir}", f"hydra.run.dir={run_dir}",
                        *TINY, *overrides], cwd=cwd, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert not list(cwd.iterdir()), f"files written outside the run dir: {list(cwd.iterdir())}"
    return run_dir, r.stdout + r.stderr


@pytest.mark.slow
def test_ddp_cpu_two_processes_match_one(tmp_path, tiny_data):
    one, _ = _train(tmp_path, tiny_data, "one", ["data.batch_size=8"])
    # 2 ranks x 4 sentences = the same global batch of 8, so the same steps and LR schedule
    two, log = _train(tmp_path, tiny_data, "ddp", ["trainer=ddp_cpu", "data.batch_size=4"])
    assert "Starting with 2 processes" in log and "distributed_backend=gloo" in log
    assert (two / "train_ddp_process_1.log").is_file()  # rank 1 ran, with rank 0's run dir
    m1, m2 = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    assert m2["epochs"] == m1["epochs"] == 8
    assert m2["global_steps"] == m1["global_steps"]
    assert list(two.rglob("metrics.json")) == [two / "metrics.json"]  # written once, by rank 0
    assert sorted(p.name for p in (two / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    for split in ("dev", "test"):
        # the toy grammar is learnable: both reach it; 2 processes sum gradients in another order
        assert m1[split]["acc"] > 90 and abs(m2[split]["acc"] - m1[split]["acc"]) <= 5.0, (m1[split], m2[split])


def _best_score(run_dir: Path) -> float:
    """The monitored value ModelCheckpoint recorded for best.ckpt: what checkpointing and early stopping read."""
    import torch

    ckpt = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    return float(best_checkpoint_state(ckpt)["best_model_score"])


@pytest.mark.slow
def test_ddp_cpu_val_metric_is_the_whole_dev_split(tmp_path, tiny_data):
    """Under trainer=ddp_cpu the val metric is the score of the whole dev split, each sentence once: the value that
    one process computes for the same weights (metrics.json's dev score: best.ckpt evaluated on rank 0 alone)."""
    # 12 dev sentences in eval batches of 5 -> 3 batches; the sampler pads them to 4 so that 2 ranks stay in step,
    # and one batch is validated twice. One short epoch keeps the model imperfect, so shard scores differ.
    short = ["data.eval_batch_size=5", "trainer.max_epochs=1", "optimizer.lr=0.003"]
    for name, overrides in (("one", ["data.batch_size=8"]), ("ddp", ["trainer=ddp_cpu", "data.batch_size=4"])):
        run, _ = _train(tmp_path, tiny_data, name, [*short, *overrides])
        dev = json.loads((run / "metrics.json").read_text())["dev"]
        assert 0 < dev["acc"] < 100, dev["acc"]  # a perfect model would score 100 on any shard
        assert _best_score(run) == pytest.approx(dev["acc"], abs=1e-4), name
