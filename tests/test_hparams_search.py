"""hparams_search=optuna_self_attention end to end through ``python -m tagger.train``, with the study in SQLite."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]


def _search(tmp_path: Path, data_dir: Path, sweep_dir: Path, storage: str, n_trials: int) -> None:
    r = subprocess.run([sys.executable, "-m", "tagger.train", "hparams_search=optuna_self_attention", f"data_dir={data_dir}",
                        f"hydra.sweep.dir={sweep_dir}", f"hydra.sweeper.storage={storage}",
                        f"hydra.sweeper.n_trials={n_trials}", "hydra.sweeper.sampler.n_startup_trials=2",
                        "trainer.max_epochs=1", "data.batch_size=8", "~callbacks.progress_bar",
                        "+trainer.enable_progress_bar=false"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
def test_optuna_search_runs_with_sqlite_storage_and_resumes(tmp_path, tiny_data):
    import optuna

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _search(tmp_path, tiny_data, tmp_path / "sweep", storage, n_trials=3)
    study = optuna.load_study(study_name="self_attention", storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3
    # each trial's value is the dev metric its run dir recorded, with the sampled parameters in its config
    for t in trials:
        run = json.loads((tmp_path / "sweep" / f"trial{t.number}" / "metrics.json").read_text())
        assert t.value == pytest.approx(run["dev"]["acc"])
        assert run["config"]["model"]["d_model"] == t.params["model.d_model"]
    best = OmegaConf.load(tmp_path / "sweep" / "optimization_results.yaml")
    assert best["best_value"] == pytest.approx(max(t.value for t in trials))

    # the same storage and study name continue the study (TPE now samples from the stored trials)
    _search(tmp_path, tiny_data, tmp_path / "sweep2", storage, n_trials=2)
    study = optuna.load_study(study_name="self_attention", storage=storage)
    assert [t.number for t in study.get_trials(states=[optuna.trial.TrialState.COMPLETE])] == [0, 1, 2, 3, 4]
