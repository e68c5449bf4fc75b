"""tagger tune end to end: two processes at once complete trials of one study in SQLite, and a third continues it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]


def _tune(cwd: Path, data_dir: Path, storage: str, n_trials: int) -> subprocess.Popen:
    """A `tagger tune` process on the tiny corpus: tiny models, 2 epochs, 2 random trials before TPE."""
    command = [sys.executable, "-m", "tagger.cli", "tune", "hparams_search=optuna_self_attention", f"data_dir={data_dir}",
               "trainer.max_epochs=2", "data.batch_size=8", "~callbacks.progress_bar", "+trainer.enable_progress_bar=false",
               "model.d_model=choice(16, 32)", "model.ffn_dim=32", "model.layers=1", "model.heads=2",
               "search.sampler.n_startup_trials=2", "--storage", storage, "--study-name", "shared",
               "--sweep-dir", "sweep", "--n-trials", str(n_trials)]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": path})


def _finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_two_processes_share_one_study_in_sqlite_and_a_third_continues_it(tmp_path, tiny_data):
    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    processes = [_tune(tmp_path, tiny_data, storage, n_trials=3) for _ in range(2)]
    for p in processes:
        _finish(p)
    study = optuna.load_study(study_name="shared", storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 6
    assert sorted(t.number for t in trials) == list(range(6))  # numbered by the study: no run dir written twice
    by_process = {pid: [t for t in trials if t.user_attrs["pid"] == pid] for pid in (p.pid for p in processes)}
    assert [len(ts) for ts in by_process.values()] == [3, 3]
    # the two ran at the same time: a trial of one started while one of the other was running
    a, b = by_process.values()
    assert any(s.datetime_start < t.datetime_complete and t.datetime_start < s.datetime_complete for s in a for t in b)
    for t in trials:  # each trial's value is the dev metric its run dir recorded, with its sampled parameters
        run = json.loads((tmp_path / "sweep" / f"trial{t.number}" / "metrics.json").read_text())
        assert t.user_attrs["run_dir"] == str(tmp_path / "sweep" / f"trial{t.number}")
        assert t.value == pytest.approx(run["dev"]["acc"]) and t.user_attrs["test"] == pytest.approx(run["test"]["acc"])
        assert run["config"]["model"]["d_model"] == t.params["model.d_model"]
        assert run["config"]["optimizer"]["lr"] == pytest.approx(t.params["optimizer.lr"])

    # the same storage and study name continue the study: TPE samples from all six stored trials
    result = _finish(_tune(tmp_path, tiny_data, storage, n_trials=1))
    assert result["trials"] == {"COMPLETE": 7}
    assert result["best_value"] == pytest.approx(max(t.value for t in optuna.load_study(
        study_name="shared", storage=storage).get_trials(deepcopy=False)))
    assert OmegaConf.load(tmp_path / "sweep" / "optimization_results.yaml")["best_trial"] == result["best_trial"]
    assert (tmp_path / "sweep" / "trial6" / "metrics.json").exists()
