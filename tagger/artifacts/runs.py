"""Which trained model a command-line argument names: one answer for predict, package, export, evaluate,
report and bench.

An argument is one of

* a run dir of ``python -m tagger.train`` (``metrics.json`` and ``checkpoints/best.ckpt``);
* a report's ``best.json`` (its ``checkpoint`` and/or ``run_dir``; it fills what the run dir lacks);
* a ``.ckpt`` file (inside ``RUN_DIR/checkpoints/`` the run's ``metrics.json`` comes along);
* a BentoML model-store tag ``NAME:VERSION`` (``NAME:latest``): a model already packaged.

:func:`resolve` says which files that is (a :class:`Source`), :func:`load` loads the model,
:func:`best_checkpoint` finds the best checkpoint of a run dir, :func:`find_best` the best run of a task,
:func:`comparison_runs` the run dirs of ``make compare``.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tagger.artifacts.checkpoint import CheckpointError, LoadedModel, load_checkpoint
from tagger.artifacts.package_format import RUN_INFO

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]  # the checkout's root, two folders above this file
# where `make compare` writes a task's runs (the Makefile's CC_SWEEP): multirun/COMPARE_DIRS[task]/MODEL-glove_seedN
COMPARE_DIRS = {"pos": "cross_corpus/ud_ewt", "ner": "cross_corpus/conll2003"}
KINDS = "a run dir, a best.json, a .ckpt file or a model store tag NAME:VERSION"
_STORE_TAG = re.compile(r"[A-Za-z0-9][\w.-]*:[\w.-]+")


class RunError(CheckpointError):
    """An argument names no run dir, best.json, checkpoint or packaged model (the message says which and why)."""


@dataclass
class Source:
    """What an argument names. ``checkpoint`` is None for a model-store tag (``store_tag`` then)."""

    checkpoint: Path | None
    run_dir: Path | None
    metrics: dict[str, Any] = field(default_factory=dict)  # the run's metrics.json ({} for a bare checkpoint)
    store_tag: str | None = None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunError(f"{path}: cannot read it as JSON: {e}") from e
    if not isinstance(data, dict):
        raise RunError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _metrics_of(run_dir: Path | None) -> dict[str, Any]:
    path = run_dir / "metrics.json" if run_dir else None
    return _read_json(path) if path and path.is_file() else {}


def _existing(path: str | Path, base: Path) -> Path:
    """A path from a json file: as written, else relative to the file's folder."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or p.exists() else base / p


def best_checkpoint(run_dir: Path, metrics: dict[str, Any] | None = None) -> Path | None:
    """The best checkpoint of a run dir: the file ``metrics.json`` names, looked for first inside the run
    dir as given (relative paths stay relative, a moved run dir still finds it), then ``checkpoints/best.ckpt``."""
    recorded = (metrics if metrics is not None else _metrics_of(run_dir)).get("best_checkpoint")
    candidates = [run_dir / "checkpoints" / Path(recorded).name, _existing(recorded, run_dir)] if recorded else []
    return next((p for p in [*candidates, run_dir / "checkpoints" / "best.ckpt"] if p.is_file()), None)


def is_trained(run_dir: Path) -> bool:
    """A finished training run: ``metrics.json`` and a best checkpoint."""
    return (run_dir / "metrics.json").is_file() and best_checkpoint(run_dir) is not None


def _from_best_json(path: Path) -> Source:
    best = _read_json(path)
    run_dir = _existing(best["run_dir"], path.parent) if best.get("run_dir") else None
    if best.get("checkpoint"):
        ckpt = _existing(best["checkpoint"], path.parent)
    elif run_dir is not None:
        ckpt = run_dir / "checkpoints" / "best.ckpt"
    else:
        raise RunError(f"{path}: expected a best.json with a 'checkpoint' or 'run_dir' key")
    metrics = _metrics_of(run_dir)
    for key in ("task", "model", "dev", "test", "config"):  # best.json fills what the run dir lacks
        if key in best and key not in metrics:
            metrics[key] = best[key]
    return Source(ckpt, run_dir, metrics)


def _from_store(tag: str) -> Source:
    import bentoml

    try:
        model = bentoml.models.get(tag)
    except bentoml.exceptions.NotFound as e:
        raise RunError(f"{tag}: not a path, and no such model in the BentoML store ({e})") from e
    run_info = Path(model.path) / RUN_INFO  # the run's metrics.json
    return Source(None, None, _read_json(run_info) if run_info.is_file() else {}, str(model.tag))


def resolve(arg: str | Path) -> Source:
    """The files ``arg`` names (see the module docstring); RunError naming the argument when it names none."""
    path = Path(arg).expanduser()
    if path.is_dir():
        metrics = _metrics_of(path)
        ckpt = best_checkpoint(path, metrics)
        if ckpt is None:
            raise RunError(f"{path}: no checkpoints/best.ckpt (is it a run dir of `python -m tagger.train`?)")
        return Source(ckpt, path, metrics)
    if path.suffix == ".json" and path.is_file():
        return _from_best_json(path)
    if path.is_file():  # a checkpoint; inside RUN_DIR/checkpoints/ the run's metrics come along
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        if run_dir is not None and (run_dir / "metrics.json").is_file():
            return Source(path, run_dir, _metrics_of(run_dir))
        return Source(path, None, {})
    if isinstance(arg, str) and _STORE_TAG.fullmatch(arg):
        return _from_store(arg)
    raise RunError(f"{path}: not found (expected {KINDS})")


def load(arg: str | Path | Source) -> LoadedModel:
    """The model ``arg`` names, loaded: from its checkpoint, or from the model store for a store tag."""
    source = arg if isinstance(arg, Source) else resolve(arg)
    if source.checkpoint is not None:
        return load_checkpoint(source.checkpoint)
    import bentoml

    from tagger.artifacts.packaged import load_packaged

    return load_packaged(bentoml.models.get(source.store_tag))


# -- the best run of a task --------------------------------------------------------------------
def _checkpoint_here(best_json: Path) -> bool:
    """A committed report's best.json names a run of the machine that made it: usable only where its checkpoint is."""
    try:
        found = resolve(best_json).checkpoint.is_file()
    except (RunError, KeyError, OSError):
        found = False
    if not found:
        log.info("%s: its checkpoint is not on this machine; skipped", best_json)
    return found


def _task_of(best_json: Path) -> str | None:
    """The task a report's best.json names (None where it cannot be read)."""
    try:
        return json.loads(best_json.read_text()).get("task")
    except (OSError, json.JSONDecodeError, AttributeError):
        log.info("%s: not a readable best.json; skipped", best_json)
        return None


def comparison_runs(task: str, multirun: Path, model: str = "*") -> list[Path]:
    """The run dirs of ``make compare`` for a task under ``multirun``, of one model or (``*``) all, sorted."""
    return sorted((multirun / COMPARE_DIRS[task]).glob(f"{model}-glove_seed*"))


def find_best(task: str = "pos", roots: list[Path] | None = None) -> Path | None:
    """The best available run for ``task``: a report's ``best.json`` whose checkpoint is on this machine if there
    is one, else the run with the highest dev main metric among ``metrics.json`` files under ``multirun/`` and ``runs/``."""
    roots = roots or [REPO / "reports", REPO / "multirun", REPO / "runs"]
    bests = [p for r in roots if r.is_dir() for p in r.rglob("best.json") if _task_of(p) == task and _checkpoint_here(p)]
    if bests:
        return max(bests, key=lambda p: p.stat().st_mtime)
    candidates = []
    for root in roots:
        for m in root.rglob("metrics.json") if root.is_dir() else []:
            try:
                metrics = json.loads(m.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            score = (metrics.get("dev") or {}).get(metrics.get("main_metric", ""))
            if metrics.get("task") == task and score is not None and best_checkpoint(m.parent, metrics) is not None:
                candidates.append((score, m.parent))
    return max(candidates)[1] if candidates else None
