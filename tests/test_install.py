"""Installing the package outside the checkout: what the wheel holds (the packages setuptools finds, and the built
wheel: tagger/ with its configs and serve/, no benchmark or load generator), and a new virtual environment,
``pip install torch`` then ``pip install CHECKOUT[serve]``; ``tagger --help``, ``tagger train`` on a tiny corpus from
another folder, and ``tagger.load`` on the run it wrote. The last is slow: pip installs every dependency (from its
cache when it has them)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import write_conll

REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the CPU wheel the Makefile installs first


def _sh(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    # no PYTHONPATH: the installed package, never the checkout, must be what runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(args)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _source_copy(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored): no build output lands in the checkout."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_the_package_list_is_every_folder_of_tagger_serve_and_conf():
    """pyproject.toml lists the packages the wheel holds: every folder of tagger/ and serve/, and conf/ (its groups
    included) as tagger.conf; nothing of bench/."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {".".join(d.relative_to(REPO).parts) for top in ("tagger", "serve")
               for d in [REPO / top, *(REPO / top).rglob("*")] if d.is_dir() and "__pycache__" not in d.parts}
    conf = {"tagger.conf"} | {f"tagger.conf.{d.name}" for d in (REPO / "conf").iterdir() if d.is_dir()}
    assert listed == folders | conf
    assert setuptools["package-dir"] == {"tagger.conf": "conf"}
    assert not [p for p in listed if "bench" in p or "loadgen" in p]
    assert (REPO / "bench" / "loadgen.py").is_file()  # the tools stay in the checkout, beside the package


def test_the_configs_are_found_in_the_checkout():
    from tagger.train import CONF_DIR

    assert CONF_DIR == REPO / "conf" and (CONF_DIR / "train.yaml").is_file()


def test_the_wheel_holds_the_configs_and_no_benchmark(tmp_path):
    """A few seconds: setuptools builds the wheel from a copy of the checkout, offline (no build isolation)."""
    src = _source_copy(tmp_path / "src")
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
         str(src)], tmp_path)
    (wheel,) = (tmp_path / "dist").glob("tagger-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("bench/") or "loadgen" in n or "/bench" in n]
    assert {"tagger/conf/train.yaml", "tagger/conf/model/self_attention.yaml", "tagger/conf/data/ud_ewt.yaml",
            "tagger/train.py", "serve/service.py", "serve/ui/index.html"} <= set(names)


@pytest.mark.slow
def test_install_outside_the_checkout_trains_and_tags(tmp_path):
    src = _source_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    _sh([sys.executable, "-m", "venv", str(venv)], tmp_path)
    pip, python, tagger = (str(venv / "bin" / name) for name in ("pip", "python", "tagger"))
    _sh([pip, "install", "-q", TORCH], tmp_path)
    _sh([pip, "install", "-q", f"{src}[serve]"], tmp_path)

    work = tmp_path / "elsewhere"
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    for name, n, seed in (("train.txt", 40, 1), ("dev.txt", 8, 2), ("test.txt", 8, 3)):
        write_conll(corpus / name, n, seed)
    assert "train" in _sh([tagger, "--help"], work).stdout
    run = work / "run"
    _sh([tagger, "train", "data=conll", f"data_dir={corpus}", "data.corpus.scheme=IOB1", "trainer.max_epochs=1",
         "~callbacks.progress_bar", "+trainer.enable_progress_bar=false", "model.d_model=32", "model.heads=2",
         "model.ffn_dim=32", "threads=1", f"hydra.run.dir={run}"], work)
    assert json.loads((run / "metrics.json").read_text())["task"] == "ner"

    code = ("import json, tagger; t = tagger.load('run')\n"
            "print(json.dumps([s.to_dict() for s in t('The state-of-the-art tagger ran. It was fast.')]))")
    sentences = json.loads(_sh([python, "-c", code], work).stdout)
    assert len(sentences) == 2
    assert sentences[0]["tokens"][1] == "state-of-the-art"  # data=conll: CoNLL-2003's convention
    assert sentences[1]["offsets"][0] == [33, 35]  # "It"
    assert "site-packages" in _sh([python, "-c", "import tagger; print(tagger.__file__)"], work).stdout
