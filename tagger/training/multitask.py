"""Training a model of several tasks: per-task dev metrics and the one score that picks the checkpoint.

:class:`MultiTaskModule` is :class:`~tagger.training.lightning_module.TaggerModule` (optimisation, timing,
checkpoint contents) for a :class:`~tagger.models.multitask.MultiTaskTagger`. A training batch holds one task's
sentences (``batch["task"]``, :class:`tagger.data.multitask.TaskBatches`), so its loss, weighted by the task's
``tasks.NAME.weight``, trains that task's head and the shared body only. Validation and test run one loader per
task; each task is scored with its own metrics and logged as ``val/NAME/METRIC`` (``val/pos/acc``,
``val/ner/f1``), and :data:`SELECTION_KEY` (``val/tasks_mean``), the unweighted mean of the tasks' main metrics
(accuracy, entity F1, both in percent), is the monitored key that picks the best checkpoint and stops early.
"""
from __future__ import annotations

from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagger.data.multitask import MultiTaskDataModule
from tagger.data.vocab import Vocab
from tagger.inference.predictor import Predictor
from tagger.metrics import SELECTION, task_metrics, tasks_mean
from tagger.training.lightning_module import TaggerModule

SELECTION_KEY = f"val/{SELECTION}"  # tagger.metrics.tasks_mean of the dev metrics


def task_configs(cfg: DictConfig) -> dict[str, dict[str, Any]]:
    """The saved model config of each task of ``cfg.tasks``: its head (``tasks.NAME.head``) and loss weight
    (``tasks.NAME.weight``), checked."""
    out = {}
    for name, task in cfg.tasks.items():
        for key in ("data", "head"):
            if not task.get(key) or "_target_" not in task[key]:
                raise ValueError(f"tasks.{name}.{key}: each task needs a {key} config with a _target_ "
                                 f"(e.g. /{key}@tasks.{name}.{key}: ... in an experiment's defaults)")
        weight = task.get("weight", 1.0)
        if not isinstance(weight, (int, float)) or not weight > 0:
            raise ValueError(f"tasks.{name}.weight must be a number > 0, got {weight!r}")
        out[str(name)] = {"head": OmegaConf.to_container(task.head, resolve=True), "weight": float(weight)}
    if cfg.get("aux"):
        raise ValueError("aux: the auxiliary objectives take a single-task model; set aux=null with tasks")
    return out


def multitask_datamodule(cfg: DictConfig, vectors: Any = None, base_vocab: Vocab | None = None) -> MultiTaskDataModule:
    """``cfg.data`` (conf/data/multitask.yaml) around each task's data module (``tasks.NAME.data``)."""
    tasks = {str(name): instantiate(task.data) for name, task in cfg.tasks.items()}
    return instantiate(cfg.data, _partial_=True)(tasks=tasks, vectors=vectors, base_vocab=base_vocab)


class MultiTaskModule(TaggerModule):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.task_vocabs = {name: self.vocab.for_task(name) for name in self.vocab.task_names}
        self.task_names = list(self.task_vocabs)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)  # the batch task's weighted loss, logged as train/loss
        self.log(f"train/{batch['task']}/loss", loss.detach(), batch_size=batch["mask"].shape[0])
        return loss

    def _eval_tags(self, batch: dict[str, Any], dataloader_idx: int) -> torch.Tensor:
        task = self.task_names[dataloader_idx]
        return self._tags({**batch, "task": task}, lambda: Predictor(self.tagger, self.vocab, tasks=[task]),
                          self.task_vocabs[task].labels)

    def _row_key(self, index: int, dataloader_idx: int) -> Any:
        return dataloader_idx, index  # keeps the rows of the tasks apart when they are gathered by row[0]

    def validation_step(self, batch, batch_idx, dataloader_idx: int = 0) -> None:
        self._eval_step(batch, "val", dataloader_idx)

    def test_step(self, batch, batch_idx, dataloader_idx: int = 0) -> None:
        self._eval_step(batch, "test", dataloader_idx)

    def _eval_epoch_end(self, stage: str) -> dict[str, Any]:
        rows = self._all_rows(stage)
        results: dict[str, dict[str, Any]] = {}
        for position, (name, vocab) in enumerate(self.task_vocabs.items()):
            mine = [r for r in rows if r[0][0] == position]
            labels = vocab.labels
            gold = [[labels[t] for t in g] for _, g, _, _ in mine]
            pred = [[labels[t] for t in p] for _, _, p, _ in mine]
            metrics = task_metrics(vocab.task, gold, pred, [u for _, _, _, u in mine], vocab.tag_scheme or "IOB2")
            results[name] = metrics
            scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
            self.log_dict({f"{stage}/{name}/{k}": v for k, v in scalars.items()}, prog_bar=False, sync_dist=True)
        score = tasks_mean(results, {name: v.task for name, v in self.task_vocabs.items()})
        self.log(f"{stage}/{SELECTION}", score, prog_bar=True, sync_dist=True)
        return results
