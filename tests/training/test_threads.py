"""The ``threads`` config value (tagger/training/threads.py)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tagger.training import threads


def test_a_number_is_kept_and_null_leaves_torch_its_default():
    assert threads.training_threads(3) == 3
    assert threads.training_threads(None) is None


@pytest.mark.parametrize("bad", [0, -2, "two", 1.5, True])
def test_a_bad_value_names_the_key(bad):
    with pytest.raises(ValueError, match="threads must be"):
        threads.training_threads(bad)


@pytest.mark.parametrize("cores,others,expected", [(2, 0, 2), (8, 1, 4), (8, 2, 2), (2, 3, 1)])
def test_auto_shares_the_cores_with_the_other_trainings(monkeypatch, cores, others, expected):
    monkeypatch.setattr(threads, "usable_cores", lambda: cores)
    monkeypatch.setattr(threads, "running_trainings", lambda exclude=None: others)
    assert threads.training_threads("auto") == expected


@pytest.mark.parametrize("argv,training", [
    (["/v/bin/python", "-m", "tagger.train", "seed=1"], True),
    (["/v/bin/python", "/v/bin/tagger", "train", "experiment=pos"], True),
    (["/v/bin/python", "/v/bin/tagger", "predict", "x"], False),
    (["/v/bin/python", "-m", "tagger.serve"], False),
    (["python"], False),
])
def test_what_counts_as_a_training(argv, training):
    assert threads.is_training(argv) is training


def test_running_trainings_counts_a_running_process_not_a_stopped_one(tmp_path):
    # a process whose command line is a training's: `python -m tagger.train` finds tmp_path/tagger/train.py first
    (tmp_path / "tagger").mkdir()
    (tmp_path / "tagger" / "__init__.py").write_text("")
    (tmp_path / "tagger" / "train.py").write_text("import time\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "tagger.train"], cwd=tmp_path)
    try:
        time.sleep(0.5)
        assert threads.running_trainings() - threads.running_trainings(exclude=proc.pid) == 1
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.2)
        assert threads.running_trainings() - threads.running_trainings(exclude=proc.pid) == 0
    finally:
        proc.kill()
        proc.wait()
