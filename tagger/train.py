"""Train a tagger: ``python -m tagger.train [data=...] [model=...] [head=...] [key=value ...]`` (also ``tagger train``).

The Hydra entry point: composes the configs (``train.yaml`` and its groups) with the command line's overrides
and runs :func:`tagger.training.run.train`, which instantiates data -> model -> callbacks/loggers -> trainer,
fits, evaluates the best checkpoint on dev and test and writes ``metrics.json`` into the run dir. The dev
metric it returns is what a sweeper optimises.
"""
from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from tagger.training.run import train


def config_dir() -> Path:
    """The Hydra configs: ``tagger/conf`` in an installed package (setuptools installs the checkout's ``conf/``
    there), ``conf/`` at the top of a checkout. An absolute path, so `tagger train` and `python -m tagger.train`
    find the configs wherever they run."""
    package = Path(__file__).resolve().parent
    candidates = (package / "conf", package.parent / "conf")
    found = next((c for c in candidates if (c / "train.yaml").is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no Hydra configs (train.yaml) in {' or '.join(map(str, candidates))}")
    return found


CONF_DIR = config_dir()


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> float | None:
    results = train(cfg)
    dev = results.get("dev") or {}
    return dev.get(results.get("main_metric"))


if __name__ == "__main__":
    main()
