"""Train a tagger: ``python -m tagger.train [data=...] [model=...] [head=...] [key=value ...]`` (also ``tagger train``).

The Hydra entry point: composes the configs (``train.yaml`` and its groups) with the command line's overrides
and runs :func:`tagger.training.run.train`, which instantiates data -> model -> callbacks/loggers -> trainer,
fits, evaluates the best checkpoint on dev and test and writes ``metrics.json`` into the run dir. A search over
hyper-parameters is ``tagger tune`` (tagger/commands/tune.py), which calls the same function once per trial.
"""
from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from tagger.training.configs import CONF_DIR, config_dir  # noqa: F401  (tagger.train.CONF_DIR: where the configs are)
from tagger.training.run import train

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> float | None:
    if "search" in cfg:
        log.info("hparams_search: one training with the search's settings; `tagger tune` runs the search")
    results = train(cfg)
    dev = results.get("dev") or {}
    return dev.get(results.get("main_metric"))


if __name__ == "__main__":
    main()
