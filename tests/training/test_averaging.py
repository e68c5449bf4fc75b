"""Tail weight averaging (callbacks=swa): the final and checkpointed weights are the equal average of the
epoch-end weights from `start` on; before it, runs and checkpoints are ordinary."""
from __future__ import annotations

import json

import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from tagger.training.averaging import TailAveraging
from tests.conftest import train_tiny


class _Linear(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 1)
        self.seen: list[dict[str, torch.Tensor]] = []  # raw weights at each epoch end

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/loss", nn.functional.mse_loss(self.layer(x), y))

    def on_train_epoch_end(self):  # LightningModule hooks run after the callbacks' hooks of the same name
        self.seen.append({k: v.detach().clone() for k, v in self.layer.state_dict().items()})

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 3, generator=g)
    return torch.utils.data.DataLoader(list(zip(x, x.sum(1, keepdim=True))), batch_size=8)


def _fit(tmp_path, start, epochs=4):
    torch.manual_seed(0)
    model = _Linear()
    trainer = pl.Trainer(max_epochs=epochs, callbacks=[TailAveraging(start=start)], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, _loader(1), _loader(2))
    return model, trainer


def test_final_weights_are_the_mean_of_the_epochs_from_start_on(tmp_path):
    model, trainer = _fit(tmp_path, start=2, epochs=5)
    assert len(model.seen) == 5
    for name, value in model.layer.state_dict().items():
        expected = torch.stack([s[name] for s in model.seen[2:]]).mean(0)
        assert torch.allclose(value, expected, atol=1e-6), name
        assert not torch.allclose(value, model.seen[-1][name])  # not just the last weights


def test_fraction_start_and_a_checkpoint_holds_the_average_then(tmp_path):
    model, trainer = _fit(tmp_path, start=0.5, epochs=4)  # epochs 2 and 3
    averaged = {k: torch.stack([s[k] for s in model.seen[2:]]).mean(0) for k in model.seen[0]}
    path = tmp_path / "x.ckpt"
    trainer.save_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    assert torch.allclose(ckpt["state_dict"]["layer.weight"], averaged["weight"], atol=1e-6)


def test_before_start_nothing_is_swapped_or_stored(tmp_path):
    model, trainer = _fit(tmp_path, start=10, epochs=3)  # never reaches start
    for name, value in model.layer.state_dict().items():
        assert torch.equal(value, model.seen[-1][name])  # the trained weights, not the untrained copy
    path = tmp_path / "x.ckpt"
    trainer.save_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    assert "current_model_state" not in ckpt
    assert torch.equal(ckpt["state_dict"]["layer.weight"], model.seen[-1]["weight"])


@pytest.mark.parametrize("start", [-1, 1.0, 1.5, "half", True])
def test_bad_start_is_a_clear_error(start):
    with pytest.raises(ValueError, match="callbacks.weight_averaging.start"):
        TailAveraging(start=start)


def test_callbacks_swa_trains_through_hydra_and_the_best_checkpoint_loads(tmp_path, tiny_data):
    from tagger.artifacts.checkpoint import load_checkpoint

    out = train_tiny(tmp_path, tiny_data, ["model=self_attention", "model.d_model=32", "model.heads=2",
                                           "model.ffn_dim=32", "trainer.max_epochs=4", "callbacks=swa",
                                           "callbacks.weight_averaging.start=2"])
    m = json.loads((out / "metrics.json").read_text())
    assert m["config"]["callbacks"]["weight_averaging"]["start"] == 2
    assert 0 <= m["dev"]["acc"] <= 100
    loaded = load_checkpoint(out / "checkpoints" / "last.ckpt")  # weights_only load of an averaged checkpoint
    assert loaded.tagger is not None


def test_best_checkpoint_holds_the_weights_its_score_was_measured_on(tmp_path):
    """ModelCheckpoint saves at the train epoch's end, after validation: the average it stores must be
    the one that was validated, not one with the epoch's weights added afterwards."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    torch.manual_seed(0)
    model = _Linear()
    ckpt = ModelCheckpoint(dirpath=tmp_path, filename="best", monitor="val/loss", mode="min", save_top_k=1)
    trainer = pl.Trainer(max_epochs=5, callbacks=[TailAveraging(start=1), ckpt], logger=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, _loader(1), _loader(2))
    state = torch.load(tmp_path / "best.ckpt", weights_only=True)["state_dict"]
    best = _Linear()
    best.load_state_dict(state)
    val = torch.stack([nn.functional.mse_loss(best.layer(x), y) for x, y in _loader(2)]).mean()
    assert torch.isclose(val, ckpt.best_model_score, rtol=1e-5), (val, ckpt.best_model_score)
    epoch = torch.load(tmp_path / "best.ckpt", weights_only=True)["epoch"]
    expected = torch.stack([s["weight"] for s in model.seen[1:epoch + 1]]).mean(0)
    assert torch.allclose(state["layer.weight"], expected, atol=1e-6)
