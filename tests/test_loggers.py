"""Optional training monitors from the configs: logger=tensorboard and callbacks=rich (the `monitor` extra)."""
from __future__ import annotations

import pytest
from hydra.utils import instantiate

from tests.conftest import compose


@pytest.mark.parametrize("choice", ["rich", "[swa,rich]"])
def test_rich_progress_bar_replaces_tqdm(tmp_path, tiny_data, choice):
    from pytorch_lightning.callbacks import RichProgressBar, TQDMProgressBar

    cfg = compose([f"data_dir={tiny_data}", f"callbacks={choice}"], tmp_path)
    callbacks = {name: instantiate(node) for name, node in cfg.callbacks.items()}
    assert isinstance(callbacks["progress_bar"], RichProgressBar)
    assert not any(isinstance(c, TQDMProgressBar) for c in callbacks.values())
    assert "model_checkpoint" in callbacks and ("weight_averaging" in callbacks) == ("swa" in choice)


def test_tensorboard_logger_writes_event_files_beside_the_csv_log(tmp_path, tiny_data):
    """A tiny training with logger=tensorboard (and the rich bar) leaves event files that hold the dev metric."""
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tagger.training.run import train

    cfg = compose([f"data_dir={tiny_data}", "logger=tensorboard", "callbacks=rich", "trainer.max_epochs=2",
                   "data.batch_size=8", "threads=1", "model.d_model=32", "model.heads=2", "model.ffn_dim=32"], tmp_path)
    loggers = [instantiate(node) for node in cfg.logger.values()]
    assert sorted(type(x).__name__ for x in loggers) == sorted([CSVLogger.__name__, TensorBoardLogger.__name__])
    train(cfg)
    events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert events, sorted(p.name for p in tmp_path.rglob("*"))
    logged = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert [e.step for e in logged.Scalars("val/acc")] == [7, 15]  # once per epoch of 8 steps (60 sentences / 8)
    assert all(0 <= e.value <= 100 for e in logged.Scalars("val/acc"))
    assert (tmp_path / "csv" / "metrics.csv").is_file()  # the reports' learning curves still have their source
