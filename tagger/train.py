"""Train a tagger: ``python -m tagger.train [data=...] [model=...] [head=...] [key=value ...]`` (also ``tagger train``).

The Hydra entry point: composes the configs (``train.yaml`` and its groups) with the command line's overrides
and runs :func:`tagger.training.run.train`, which instantiates data -> model -> callbacks/loggers -> trainer,
fits, evaluates the best checkpoint on dev and test and writes ``metrics.json`` into the run dir. The dev
metric it returns is what a sweeper optimises.
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from tagger.training.configs import CONF_DIR, config_dir  # noqa: F401  (tagger.train.CONF_DIR: where the configs are)
from tagger.training.run import train


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> float | None:
    results = train(cfg)
    dev = results.get("dev") or {}
    return dev.get(results.get("main_metric"))


if __name__ == "__main__":
    main()
