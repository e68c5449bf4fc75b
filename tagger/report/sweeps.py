"""Run dirs and sweeps on disk: what each run left (metrics.json, Hydra overrides, logs) and, for a run
without results, why; the jobs a sweep was to launch and never did."""
from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml


class ReportError(RuntimeError):
    """The report cannot be made from these run dirs (named in the message)."""


@dataclass
class Run:
    path: Path
    metrics: dict[str, Any] | None  # metrics.json; None when the run has no results
    overrides: list[str]  # .hydra/overrides.yaml: the command-line overrides of the job
    problem: str | None = None  # why it has no results
    variant: str = ""
    evaluation: dict[str, Any] | None = None  # re-evaluation of the test split (see evaluate_run)
    eval_problem: str | None = None
    model_choice: str | None = None  # .hydra/hydra.yaml: the model config chosen (names runs without results)
    label: str | None = None  # names its variant beside the model (one task of a multi-task run, a results row)
    model_task: str | None = None  # one task of a multi-task run: its metrics and config are that task's (.multitask)
    scores_only: bool = False  # a line of results.jsonl: dev and test scores, no checkpoint here (.baselines)

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def main_metric(self) -> str:
        return self.metrics["main_metric"]

    @property
    def config(self) -> dict[str, Any]:
        return self.metrics.get("config") or {}

    @property
    def max_train_len(self) -> int | None:
        return (self.config.get("data") or {}).get("max_train_len")

    @property
    def seed(self) -> int | str:
        if self.metrics and "seed" in self.metrics:
            return self.metrics["seed"]
        return next((o.split("=", 1)[1] for o in self.overrides if o.lstrip("+").startswith("seed=")), "?")

    def score(self, split: str) -> float | None:
        return (self.metrics.get(split) or {}).get(self.main_metric)

    def identity(self) -> frozenset[str]:
        """The job's overrides without the seed: runs of one variant share it."""
        return _identity(self.overrides)


def _identity(overrides: Iterable[str]) -> frozenset[str]:
    return frozenset(o for o in overrides if not o.lstrip("+~").startswith("seed="))


@dataclass
class Sweep:
    path: Path
    command: str
    params: dict[str, str]
    expected: list[list[str]] | None  # override sets of every job (basic sweeper), else None
    n_trials: int | None = None
    model_choice: str | None = None  # the model config of the sweep when it does not sweep models


def _last_lines(path: Path, n: int = 200) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _failure_reason(d: Path) -> str:
    """What a run dir without metrics.json tells about why."""
    parts = ["no metrics.json (failed, killed or still running)"]
    epochs = len(read_curve(d / "csv" / "metrics.csv", None))
    if epochs:
        parts.append(f"{epochs} validation epoch(s) logged")
    if (d / "checkpoints" / "last.ckpt").exists():
        parts.append("last.ckpt present")
    logs = [p for p in (d / "train.log", d / "csv" / "metrics.csv") if p.exists()]
    if logs:
        age = time.time() - max(p.stat().st_mtime for p in logs)
        if age < 600:
            parts.append(f"log written {age:.0f} s ago: probably still running")
    errors = [ln for ln in _last_lines(d / "train.log") if re.search(r"Error|Exception|Traceback|Killed", ln)]
    if errors:
        parts.append(f"train.log: {errors[-1].strip()[:200]}")
    return "; ".join(parts)


def _model_choice(hydra_cfg: dict[str, Any]) -> str | None:
    return ((hydra_cfg.get("runtime") or {}).get("choices") or {}).get("model")


def hydra_choices(d: Path) -> dict[str, str]:
    """The config chosen for each group of the run dir ``d`` (.hydra/hydra.yaml; ``data@tasks.pos.data: ud_ewt``),
    empty when the run has no Hydra record."""
    hydra_yaml = d / ".hydra" / "hydra.yaml"
    if not hydra_yaml.exists():
        return {}
    return ((yaml.safe_load(hydra_yaml.read_text()) or {}).get("hydra", {}).get("runtime") or {}).get("choices") or {}


def load_run(d: Path) -> Run:
    ov_path = d / ".hydra" / "overrides.yaml"
    overrides = [str(o) for o in (yaml.safe_load(ov_path.read_text()) or [])] if ov_path.exists() else []
    m_path = d / "metrics.json"
    if not m_path.exists():
        return Run(d, None, overrides, _failure_reason(d), model_choice=hydra_choices(d).get("model"))
    try:
        metrics = json.loads(m_path.read_text())
    except json.JSONDecodeError as e:
        return Run(d, None, overrides, f"metrics.json unreadable: {e}")
    run = Run(d, metrics, overrides)
    if run.score("dev") is None:
        run.problem = "metrics.json has no dev metrics (trained with evaluate=false?)"
    return run


def load_sweep(d: Path) -> Sweep:
    """The sweep command and, for Hydra's basic sweeper, every job it was to launch."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra_cfg = (yaml.safe_load((d / "multirun.yaml").read_text()) or {}).get("hydra", {})
    task = [str(o) for o in hydra_cfg.get("overrides", {}).get("task", [])]
    sweeper = hydra_cfg.get("sweeper") or {}
    params = {str(k): str(v) for k, v in (sweeper.get("params") or {}).items()}
    command = " ".join(["python -m tagger.train -m", *map(shlex.quote, task)])
    model = _model_choice(hydra_cfg)
    if "BasicSweeper" not in str(sweeper.get("_target_", "")):
        return Sweep(d, command, params, None, sweeper.get("n_trials"), model)
    try:
        # command-line overrides come last: they replace the config's sweeper params of the same key
        parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + task)
    except Exception:  # an override the parser cannot read: no expectation, nothing flagged missing
        return Sweep(d, command, params, None, model_choice=model)
    axes: dict[str, list[str]] = {}
    for o in parsed:
        key = o.get_key_element()
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[key] = [f"{key}={v}" for v in values]
    return Sweep(d, command, params, [list(c) for c in itertools.product(*axes.values())], model_choice=model)


def find_runs(paths: Sequence[Path]) -> tuple[list[Run], list[Sweep]]:
    """Run dirs (``metrics.json`` or ``.hydra/config.yaml``) and sweep dirs (``multirun.yaml``) under
    ``paths``. A path that does not exist is an error; one holding no run is reported, not skipped."""
    runs: dict[Path, Run] = {}
    sweeps: dict[Path, Sweep] = {}
    for root in paths:
        if not root.exists():
            raise ReportError(f"{root}: no such run or sweep dir")
        for dirpath, dirnames, filenames in os.walk(root):
            d = Path(dirpath)
            if "multirun.yaml" in filenames and d.resolve() not in sweeps:
                sweeps[d.resolve()] = load_sweep(d)
            if "metrics.json" in filenames or (d / ".hydra" / "config.yaml").is_file():
                if d.resolve() not in runs:
                    runs[d.resolve()] = load_run(d)
                dirnames[:] = []  # checkpoints/, csv/ and .hydra/ hold no runs
            else:
                dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
    return sorted(runs.values(), key=lambda r: str(r.path)), sorted(sweeps.values(), key=lambda s: str(s.path))


def missing_jobs(runs: Sequence[Run], sweeps: Sequence[Sweep]) -> list[tuple[Sweep, list[str]]]:
    """Sweep jobs (basic sweeper) with no run dir at all: the sweep stopped before them."""
    missing = []
    for sweep in sweeps:
        inside = [set(r.overrides) for r in runs if sweep.path.resolve() in r.path.resolve().parents]
        for combo in sweep.expected or []:
            if not any(set(combo) <= ov for ov in inside):
                missing.append((sweep, combo))
    return missing


def read_curve(path: Path, metric: str | None) -> list[tuple[int, int, float]]:
    """(epoch, step, dev value) per validation epoch from Lightning's CSV log; the last row of an
    epoch wins (a resumed run logs it again). ``metric`` None: the first ``val/`` column found."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    column = f"val/{metric}" if metric else next((c for c in rows[0] if c.startswith("val/")), None)
    by_epoch: dict[int, tuple[int, int, float]] = {}
    for row in rows:
        value, epoch = row.get(column or "", ""), row.get("epoch", "")
        if value not in ("", None) and epoch not in ("", None):
            e = int(float(epoch))
            by_epoch[e] = (e, int(float(row.get("step") or 0)), float(value))
    return [by_epoch[e] for e in sorted(by_epoch)]
