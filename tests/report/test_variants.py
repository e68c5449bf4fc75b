"""Every self-attention variant trains through ``python -m tagger.train`` (fast_dev_run)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import train_tiny

ONE_AT_A_TIME = (
    [f"model.score={s}" for s in ("scaled_dot", "dot", "additive")]
    + [f"model.pos_encoding={p}" for p in ("sinusoidal", "learned", "relative", "alibi", "none")]
    + ["model.pos_combine=concat", "model.pos_encoding=sinusoidal model.pos_combine=concat", "model.window=3", "model.ffn_kernel=3", "head=crf"]
)


@pytest.mark.parametrize("override", ONE_AT_A_TIME)
def test_each_choice_trains_fast_dev_run(tmp_path, tiny_data, override):
    for data in ("ud_ewt", "conll2003"):
        out = train_tiny(tmp_path / data, tiny_data, [f"data={data}", "model=self_attention", *override.split(),
                                                      "model.d_model=16", "model.heads=2", "+trainer.fast_dev_run=true"])
        assert (out / "metrics.json").exists()


@pytest.mark.slow
def test_full_grid_multirun_through_the_cli(tmp_path, tiny_data):
    """The whole grid (3 scores x 4 encodings x 2 combinations x 2 windows x 2 heads = 96 runs) as one
    Hydra multirun of the real entry point."""
    cmd = [sys.executable, "-m", "tagger.train", "-m", f"data_dir={tiny_data}", "data=conll2003", "model=self_attention",
           "model.score=scaled_dot,dot,additive", "model.pos_encoding=sinusoidal,learned,relative,none",
           "model.pos_combine=add,concat", "model.window=null,3", "head=softmax,crf", "model.d_model=16",
           "model.heads=2", "+trainer.fast_dev_run=true", "threads=1", f"hydra.sweep.dir={tmp_path}",
           "hydra.sweep.subdir=${hydra.job.num}"]
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = sorted(tmp_path.glob("*/metrics.json"))
    assert len(done) == 96
    assert {json.loads(p.read_text())["config"]["model"]["score"] for p in done} == {"scaled_dot", "dot", "additive"}
