"""The README's commands stay true: every module and make target its code blocks name exists, every
training command in it composes with the real configs, and the blocks marked to run do run.

Fenced blocks carry a tag after the language: ```` ```bash readme:compose ```` (each training command is
composed), ```` ```bash readme:train ```` (also run for real on a tiny corpus the test writes; slow),
```` ```bash readme:serve ```` (run against a served tiny model: tests/serve/test_readme_serve.py).
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import compose

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = [README, REPO / "docs" / "reference.md"]
CORPUS_PLACEHOLDER = "/path/to/corpus"


def blocks(path: Path = README, tag: str | None = None) -> list[str]:
    """Bodies of the fenced bash blocks of ``path`` (with ``tag`` in their info string, if given)."""
    found = re.findall(r"^```bash([^\n]*)\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [body for info, body in found if tag is None or tag in info.split()]


def commands(block: str) -> list[list[str]]:
    """Shell commands of a block as argument lists: continuation lines joined, comments dropped."""
    return [args for line in block.replace("\\\n", " ").splitlines()
            if (args := shlex.split(line, comments=True))]


def training_overrides(args: list[str]) -> list[str] | None:
    """Overrides of a `python -m tagger.train ...` or `make train [ARGS=...]` command, else None. A sweep
    (-m, comma lists) is reduced to its first job; `seed=N` stands for any seed."""
    if args[:3] == ["python", "-m", "tagger.train"]:
        overrides = [a for a in args[3:] if a != "-m"]
    elif args[:2] == ["make", "train"]:
        overrides = [o for a in args[2:] if a.startswith("ARGS=") for o in a[len("ARGS="):].split()]
    else:
        return None
    first = [re.sub(r"=([^\[\],]+),[^\[\]]*$", r"=\1", o) for o in overrides]
    return [re.sub(r"^seed=N$", "seed=1", o) for o in first]


def readme_training_commands() -> list[list[str]]:
    """Training commands of the tagged blocks and of inline code (the results table)."""
    found = [args for b in blocks(README, "readme:compose") + blocks(README, "readme:train") for args in commands(b)]
    inline = re.findall(r"`(python -m tagger\.train [^`]+)`", README.read_text(encoding="utf-8"))
    return [args for args in found + [shlex.split(c) for c in inline] if training_overrides(args) is not None]


def make_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([\w% .-]+):(?!=)", makefile, flags=re.M) for t in line.split()}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_module_and_make_target_named_in_a_code_block_exists(doc):
    targets = make_targets()
    for block in blocks(doc):
        for args in commands(block):
            if args[0] == "make":
                assert args[1] in targets or any(
                    t.endswith("%") and args[1].startswith(t[:-1]) for t in targets), f"{doc.name}: no make target {args[1]}"
            for i, a in enumerate(args[:-1]):
                if a == "-m" and args[i + 1].startswith("tagger."):
                    assert importlib.util.find_spec(args[i + 1]), f"{doc.name}: no module {args[i + 1]}"


def test_readme_training_commands_compose_with_the_real_configs(tmp_path):
    cmds = readme_training_commands()
    assert len(cmds) >= 10  # the blocks and the results table were found
    for args in cmds:
        try:
            cfg = compose(training_overrides(args), tmp_path)
        except Exception as e:  # noqa: BLE001 - name the README command that failed
            raise AssertionError(f"README command does not compose: {shlex.join(args)}\n{e}") from e
        assert cfg.model._target_ and cfg.data._target_


def write_iob2_corpus(root: Path) -> Path:
    """train/dev/test.txt in the column layout the README describes: word first, IOB2 tag last."""
    rng = random.Random(0)
    names, places = [["John"], ["Mary", "Smith"], ["Anna"]], [["Paris"], ["New", "York"], ["Rome"]]
    for split, n in (("train", 60), ("dev", 12), ("test", 12)):
        lines = []
        for _ in range(n):
            per, loc = rng.choice(names), rng.choice(places)
            sent = [(w, ("B-" if i == 0 else "I-") + "PER") for i, w in enumerate(per)]
            sent += [(rng.choice(["sees", "likes", "visits"]), "O"), ("in", "O")]
            sent += [(w, ("B-" if i == 0 else "I-") + "LOC") for i, w in enumerate(loc)] + [(".", "O")]
            lines += [f"{w} {t}" for w, t in sent] + [""]
        (root / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    return root


def run_block(block: str, cwd: Path, replace: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    for old, new in replace.items():
        block = block.replace(old, new)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_readme_own_corpus_training_runs(tmp_path):
    """The README's own-corpus command, as written, trains a tagger on a tiny corpus and scores it."""
    (train_block,) = blocks(README, "readme:train")
    (tmp_path / "corpus").mkdir()
    corpus = write_iob2_corpus(tmp_path / "corpus")
    done = run_block(train_block, tmp_path, {CORPUS_PLACEHOLDER: str(corpus)}, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (metrics_file,) = (tmp_path / "runs").rglob("metrics.json")
    metrics = json.loads(metrics_file.read_text())
    assert metrics["task"] == "ner" and 0 <= metrics["test"]["f1"] <= 100
    assert (metrics_file.parent / "checkpoints" / "best.ckpt").is_file()
