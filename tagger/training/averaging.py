"""Tail weight averaging (SWA-style): the equal average of the weights at the end of each epoch from a
start epoch on, built on Lightning's :class:`WeightAveraging` callback.

Lightning's callback swaps the averaged weights in for validation and stores them as the checkpoint's
``state_dict`` from the first step on; before the first update the "average" is the untrained copy made
at ``setup``, so validation scores and ``best.ckpt`` would come from random weights. Here nothing is
swapped or stored until the average holds at least one epoch's weights: before ``start`` the run is an
ordinary run, after it validation, checkpoint selection, early stopping and the final weights all see
the average.
"""
from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import WeightAveraging
from pytorch_lightning.trainer.states import TrainerFn


class TailAveraging(WeightAveraging):
    """Average the weights after each epoch from ``start`` on: an int is a 0-based epoch, a float in
    (0, 1) a fraction of ``trainer.max_epochs`` (0.6 of 25 epochs: the average of epochs 15..24)."""

    def __init__(self, start: int | float = 0.6, **kwargs: Any) -> None:
        if isinstance(start, bool) or not isinstance(start, (int, float)) or start < 0 or (
                isinstance(start, float) and start >= 1):
            raise ValueError(f"callbacks.weight_averaging.start must be an epoch (int >= 0) or a fraction "
                             f"of max_epochs in [0, 1), got {start!r}")
        super().__init__(**kwargs)
        self.start = start
        self._start_epoch = start if isinstance(start, int) else None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if self._start_epoch is None:
            self._start_epoch = int(self.start * max(1, trainer.max_epochs or 1))

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return epoch_idx is not None and epoch_idx >= self._start_epoch

    def averaging(self) -> bool:
        """True once the average holds at least one epoch's weights."""
        return self._average_model is not None and int(self._average_model.n_averaged) > 0

    # Lightning validates an epoch before its on_train_epoch_end, where WeightAveraging adds the epoch to
    # the average, and ModelCheckpoint saves after that: best.ckpt would hold one epoch more than the
    # weights its score was measured on. So the epoch joins the average here, before it is validated;
    # on_train_epoch_end still adds an epoch that was not validated (its check sees it done otherwise).
    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        at_epoch_end = getattr(trainer.fit_loop.epoch_loop.batch_progress, "is_last_batch", False)
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking and at_epoch_end:
            self.on_train_epoch_end(trainer, pl_module)
        if self.averaging():
            super().on_validation_epoch_start(trainer, pl_module)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.averaging():
            super().on_validation_epoch_end(trainer, pl_module)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        if self.averaging():
            super().on_save_checkpoint(trainer, pl_module, checkpoint)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.averaging():
            super().on_train_end(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"latest_update_epoch": self._latest_update_epoch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._latest_update_epoch = state_dict.get("latest_update_epoch", -1)
