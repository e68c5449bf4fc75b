"""Prediction and serving stay free of the training stack: importing the predictor, the packaged-model
loader or the service imports neither PyTorch Lightning nor Hydra, and the service's entry process not even
torch (each check in a fresh interpreter)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRAINING = ("pytorch_lightning", "lightning_fabric", "hydra")


def _imported_training_modules(modules: str, tmp_path: Path) -> list[str]:
    code = (f"import sys, {modules}; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(TRAINING)!r}))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENTOML_HOME": str(tmp_path / "bentoml"),
           "BENTOML_DO_NOT_TRACK": "True"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return eval(r.stdout.strip().splitlines()[-1])


def test_the_predictor_imports_neither_lightning_nor_hydra(tmp_path):
    assert _imported_training_modules("tagger.inference.predictor", tmp_path) == []


@pytest.mark.parametrize("modules", ["tagger.artifacts.packaged", "tagger.artifacts.package", "serve.service"])
def test_loading_a_packaged_model_and_the_service_import_neither(modules, tmp_path):
    assert _imported_training_modules(modules, tmp_path) == []


def test_resolving_and_loading_a_model_never_import_the_packaging(tmp_path):
    """What a command-line argument names and reading a packaged model back: neither needs the module that writes
    packages into the store."""
    code = ("import sys, tagger.artifacts.runs, tagger.artifacts.packaged, tagger.api; "
            "print('tagger.artifacts.package' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENTOML_HOME": str(tmp_path / "bentoml")}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_the_service_entry_process_does_not_import_torch(tmp_path):
    """`bentoml serve` imports the service module in its entry process too, which only checks the store entry and
    TAGGER_BACKEND: without torch it stays small (the worker loads torch with the model)."""
    code = "import sys, serve.service; print('torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENTOML_HOME": str(tmp_path / "bentoml"),
           "BENTOML_DO_NOT_TRACK": "True", "TAGGER_BACKEND": "int8"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_serving_a_model_imports_neither(tiny_pos_run, tmp_path):
    """What a service worker runs: import the service, load the packaged model, build its predictor on the
    service's backend, tag a sentence; then neither Lightning nor Hydra is in sys.modules."""
    from tests.serve.conftest import package_into

    tag = package_into(tmp_path / "bentoml", tiny_pos_run, "tagger")
    code = ("import sys, bentoml, serve.service as s; from tagger.artifacts.packaged import load_packaged; "
            "from tagger.inference.backends import make_predictor; "
            f"p = load_packaged(bentoml.models.get({tag!r})); "
            "make_predictor(p.tagger, p.vocab, s.BACKEND).predict([['the', 'cat']]); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(TRAINING)!r}))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENTOML_HOME": str(tmp_path / "bentoml"),
           "BENTOML_DO_NOT_TRACK": "True", "TAGGER_MODEL": tag}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert eval(r.stdout.strip().splitlines()[-1]) == []
