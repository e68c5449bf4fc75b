"""Multi-task runs in a report of one task. A run of several tasks (metrics.json ``"tasks": {NAME: kind}``, one
dict of metrics per task under ``dev`` and ``test``) counts as one run per task; ``--task NAME`` picks the task the
report covers. That side of the run is a run of the task's kind on the task's corpus, its model the run's, its
variant named as the multi-task model (``multi-task: pos (ud_ewt) + ner (conll2003), one encoder``), and its
checkpoint is re-evaluated through that task's head (:func:`tagger.report.evaluation.evaluate_run`)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import yaml

from tagger.metrics import MAIN_METRIC
from tagger.report.sections import Context
from tagger.report.sweeps import ReportError, Run, hydra_choices


def is_multitask(run: Run) -> bool:
    return run.ok and bool(run.metrics.get("tasks"))


def _task_config(run: Run, name: str) -> dict[str, Any]:
    return run.config["tasks"][name]


def corpus_name(run: Run, name: str) -> str:
    """The data config the task ``name`` of a multi-task run was trained on: Hydra's choice for ``tasks.NAME.data``
    (.hydra/hydra.yaml), else the ``conf/data`` file that reads the same corpus files, else the folder of its
    training file."""
    if choice := hydra_choices(run.path).get(f"data@tasks.{name}.data"):
        return str(choice)
    from tagger.training.configs import CONF_DIR

    files = (_task_config(run, name)["data"].get("corpus") or {}).get("files") or {}
    for path in sorted((Path(CONF_DIR) / "data").glob("*.yaml")):
        if files and ((yaml.safe_load(path.read_text()) or {}).get("corpus") or {}).get("files") == files:
            return path.stem
    return Path(str(files.get("train", name))).parent.name or name


def describe(run: Run) -> str:
    """``multi-task: pos (ud_ewt) + ner (conll2003), one encoder``: the run's tasks, in its order, and their corpora."""
    return "multi-task: " + " + ".join(f"{n} ({corpus_name(run, n)})" for n in run.metrics["tasks"]) + ", one encoder"


def task_side(run: Run, name: str) -> Run:
    """The multi-task ``run`` as a run of its task ``name``: that task's kind, corpus, head (Hydra's choice, where the
    run has it), main metric, dev and test metrics, and a config whose ``data`` and ``head`` are the task's; the rest
    (model, params, times) is the run's."""
    m, task = run.metrics, _task_config(run, name)
    kind = m["tasks"][name]
    head = hydra_choices(run.path).get(f"head@tasks.{name}.head") or m.get("head")
    metrics = m | {"task": kind, "data": corpus_name(run, name), "main_metric": MAIN_METRIC[kind], "head": head,
                   "dev": (m.get("dev") or {}).get(name), "test": (m.get("test") or {}).get(name),
                   "config": run.config | {"data": task["data"], "head": task["head"]}}
    return dataclasses.replace(run, metrics=metrics, label=describe(run), model_task=name)


def select_task(runs: Sequence[Run], task: str | None) -> list[Run]:
    """``runs`` with each multi-task run replaced by its side of ``task`` (``--task``); single-task runs as they
    are. ReportError naming --task when the multi-task runs have several tasks and none is chosen, or when ``task``
    is not a task of them all."""
    multi = [r for r in runs if is_multitask(r)]
    if not multi:
        kinds = sorted({r.metrics["task"] for r in runs if r.ok})
        if task is not None and kinds and kinds != [task]:
            raise ReportError(f"--task {task}: no multi-task run among the paths, and the runs are of task "
                              f"{', '.join(kinds)}")
        return list(runs)
    names = sorted({n for r in multi for n in r.metrics["tasks"]})
    if task is None:
        if len(names) > 1:
            raise ReportError(f"multi-task runs of the tasks {', '.join(names)}: a report covers one task; "
                              f"choose it with --task ({' or '.join(f'--task {n}' for n in names)})")
        task = names[0]
    for r in multi:
        if task not in r.metrics["tasks"]:
            raise ReportError(f"--task {task}: not a task of the multi-task run {r.path} "
                              f"(its tasks: {', '.join(r.metrics['tasks'])})")
    return [task_side(r, task) if is_multitask(r) else r for r in runs]


def note_multitask(c: Context) -> None:
    """Below the main table, where there are multi-task runs: what their rows hold."""
    multi = sorted({(r.variant, r.model_task) for r in c.runs if r.ok and r.model_task})
    if multi:
        c.doc.p("Multi-task runs (" + ", ".join(f"`{v}`" for v, _ in multi) + "): one model trained on several "
                f"tasks, counted here as a run of its task `{multi[0][1]}` (--task): dev and test are that task's "
                "metrics from metrics.json, and the report re-evaluates the checkpoint through that task's head. "
                "Params, epochs, fit wall time and train tokens/s are the whole model's (every task's head and "
                "batches).")
