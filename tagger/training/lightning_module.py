"""LightningModule: loss, metrics and optimisation for any Tagger; it knows no model family."""
from __future__ import annotations

import math
import time
from functools import partial
from typing import Any, Callable

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from tagger.data.vocab import Vocab
from tagger.fileio import atomic_open
from tagger.inference.predictor import Predictor
from tagger.metrics import MAIN_METRIC, task_metrics
from tagger.models.tagger import Tagger

from tagger.artifacts.checkpoint import CHECKPOINT_KEY


def warmup_decay(step: int, warmup: int, total: int, decay: str) -> float:
    """LR multiplier: linear warm-up over ``warmup`` steps, then ``decay`` (linear|cosine|constant) to 0."""
    if step < warmup:
        return (step + 1) / warmup
    if decay == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 1.0 - progress if decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))


class TaggerModule(pl.LightningModule):
    def __init__(
        self,
        tagger: Tagger,
        vocab: Vocab,
        model_config: dict[str, Any],
        optimizer: Callable[..., torch.optim.Optimizer],
        warmup_steps: int = 0,
        warmup_ratio: float = 0.0,
        decay: str = "linear",
        body_lr_scale: float = 1.0,
        freeze_body_epochs: int = 0,
    ):
        """``body_lr_scale``, ``freeze_body_epochs``: fine-tuning a model that started from another
        (``transfer.lr_scale``, ``transfer.freeze_epochs``): the body (embedder and encoder) learns at
        ``body_lr_scale`` times the head's rate, and is frozen for the first ``freeze_body_epochs`` epochs."""
        super().__init__()
        if decay not in ("linear", "cosine", "constant"):
            raise ValueError(f"schedule.decay must be linear|cosine|constant, got {decay!r}")
        self.tagger, self.vocab, self.model_config = tagger, vocab, model_config
        self.optimizer_factory = optimizer
        self.warmup_steps, self.warmup_ratio, self.decay = warmup_steps, warmup_ratio, decay
        if body_lr_scale <= 0:
            raise ValueError(f"transfer.lr_scale must be > 0, got {body_lr_scale}")
        if freeze_body_epochs < 0:
            raise ValueError(f"transfer.freeze_epochs must be >= 0, got {freeze_body_epochs}")
        self.body_lr_scale, self.freeze_body_epochs = body_lr_scale, freeze_body_epochs
        self.main_metric = MAIN_METRIC[vocab.task]
        self._outputs: dict[str, list] = {"val": [], "test": []}  # one prediction store per stage
        self.train_tokens = 0
        self.train_seconds = 0.0
        self._batch_start = 0.0

    # -- steps ------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.tagger.loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["mask"].shape[0])
        return loss

    def _body(self) -> list[torch.nn.Parameter]:
        """The parameters a transferred model brings: everything but the head (and an auxiliary objective's own)."""
        return [*self.tagger.embedder.parameters(), *self.tagger.encoder.parameters()]

    def on_train_epoch_start(self) -> None:
        if self.freeze_body_epochs:
            # requires_grad rather than Lightning's BackboneFinetuning, which adds the body to the optimizer as a new
            # parameter group when it thaws, outside the warm-up/decay schedule's base rates
            frozen = self.current_epoch < self.freeze_body_epochs
            for p in self._body():
                p.requires_grad_(not frozen)

    def on_train_batch_start(self, batch, batch_idx) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        # measured here rather than by wall clock so validation time is not counted as training
        self.train_seconds += time.perf_counter() - self._batch_start
        self.train_tokens += int(batch["mask"].sum())

    def _tags(self, batch: dict[str, Any], predictor: Callable[[], Predictor], labels: list[str]) -> torch.Tensor:
        """Predicted tag ids (B,T) of an evaluation batch; ``predictor`` and ``labels`` serve rows longer than a
        learned position table, tagged in overlapping windows as prediction does."""
        limit = self.tagger.max_len
        if limit is None or batch["mask"].shape[1] <= limit:
            return self.tagger.tags(batch)  # (B,T)
        index = {label: i for i, label in enumerate(labels)}
        pred = torch.zeros_like(batch["tags"])  # (B,T)
        for i, sent in enumerate(predictor().predict(batch["tokens"])):
            pred[i, : len(sent)] = torch.tensor([index[t.tag] for t in sent])
        return pred

    def _eval_tags(self, batch: dict[str, Any], dataloader_idx: int) -> torch.Tensor:
        return self._tags(batch, lambda: Predictor(self.tagger, self.vocab), self.vocab.labels)

    def _row_key(self, index: int, dataloader_idx: int) -> Any:
        """What sets a sentence's row apart when the rows of several processes are gathered (:meth:`_all_rows`)."""
        return index

    def _eval_step(self, batch: dict[str, Any], stage: str, dataloader_idx: int = 0) -> None:
        pred = self._eval_tags(batch, dataloader_idx)  # (B,T)
        gold, pred, unseen = batch["tags"].tolist(), pred.tolist(), batch["unseen"].tolist()
        for i, sentences in enumerate(batch["sentences"]):  # a row holds one sentence, or several of a document
            for index, start, n in sentences:
                end = start + n
                self._outputs[stage].append((self._row_key(index, dataloader_idx), gold[i][start:end],
                                             pred[i][start:end], unseen[i][start:end]))

    def validation_step(self, batch, batch_idx) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx) -> None:
        self._eval_step(batch, "test")

    def _all_rows(self, stage: str) -> list[tuple]:
        """Every evaluated sentence of the split, once each, in split order: (index, gold, pred, unseen).

        Under several processes each rank holds its shard only, and the shards overlap (the batch sampler
        repeats batches so that ranks stay in step): the metric must be that of the whole split, not the
        mean of per-rank scores, so the rows are gathered on every rank and duplicates (same index) dropped.
        """
        rows, self._outputs[stage] = self._outputs[stage], []
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            shards: list[list[tuple]] = [[] for _ in range(dist.get_world_size())]
            dist.all_gather_object(shards, rows)
            rows = list({row[0]: row for shard in shards for row in shard}.values())
        return sorted(rows)

    def _eval_epoch_end(self, stage: str) -> dict[str, Any]:
        rows = self._all_rows(stage)
        labels = self.vocab.labels
        gold = [[labels[t] for t in g] for _, g, _, _ in rows]
        pred = [[labels[t] for t in p] for _, _, p, _ in rows]
        unseen = [u for _, _, _, u in rows]
        metrics = task_metrics(self.vocab.task, gold, pred, unseen, self.vocab.tag_scheme or "IOB2")
        scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k != self.main_metric}
        # every rank computed the same figures from the same rows: the mean over ranks is each value itself
        self.log_dict({f"{stage}/{k}": float(v) for k, v in scalars.items()}, prog_bar=False, sync_dist=True)
        self.log(f"{stage}/{self.main_metric}", float(metrics[self.main_metric]), prog_bar=True, sync_dist=True)
        return metrics

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    # -- optimisation -----------------------------------------------------------------------
    def configure_optimizers(self):
        if self.body_lr_scale == 1.0:
            opt = self.optimizer_factory(params=self.parameters())
        else:
            body = {id(p) for p in self._body()}
            opt = self.optimizer_factory(params=[{"params": [p for p in self.parameters() if id(p) in body]},
                                                 {"params": [p for p in self.parameters() if id(p) not in body]}])
            opt.param_groups[0]["lr"] *= self.body_lr_scale  # before the scheduler reads each group's base rate
        total = int(self.trainer.estimated_stepping_batches)
        warmup = self.warmup_steps or int(self.warmup_ratio * total)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, partial(warmup_decay, warmup=max(1, warmup), total=total, decay=self.decay)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # -- checkpoint contents ----------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # plain dicts/lists only, so torch.load(weights_only=True) can read every checkpoint
        checkpoint[CHECKPOINT_KEY] = {"config": self.model_config, "vocab": self.vocab.to_dict()}
        checkpoint[CHECKPOINT_KEY]["train_tokens"] = self.train_tokens
        checkpoint[CHECKPOINT_KEY]["train_seconds"] = self.train_seconds

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get(CHECKPOINT_KEY, {})
        self.train_tokens = saved.get("train_tokens", 0)
        self.train_seconds = saved.get("train_seconds", 0.0)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints through :func:`atomic_open`: a crash mid-write never leaves a half-written
    ``best.ckpt``/``last.ckpt`` behind."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        with atomic_open(path) as f:
            torch.save(checkpoint, f)
