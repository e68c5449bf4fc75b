"""Where the Hydra configs are, and the training config composed from them outside ``@hydra.main``.

``python -m tagger.train`` composes through ``@hydra.main``; ``tagger tune`` composes one config per trial, and the
tests compose the real configs, through :func:`compose`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, open_dict


def config_dir() -> Path:
    """The Hydra configs: ``tagger/conf`` in an installed package (setuptools installs the checkout's ``conf/``
    there), ``conf/`` at the top of a checkout. An absolute path, so `tagger train` and `python -m tagger.train`
    find the configs wherever they run."""
    package = Path(__file__).resolve().parents[1]
    candidates = (package / "conf", package.parent / "conf")
    found = next((c for c in candidates if (c / "train.yaml").is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no Hydra configs (train.yaml) in {' or '.join(map(str, candidates))}")
    return found


CONF_DIR = config_dir()


def compose(overrides: Sequence[str], output_dir: str | Path, conf_dir: str | Path = CONF_DIR) -> DictConfig:
    """``train.yaml`` composed with ``overrides`` as ``python -m tagger.train OVERRIDES`` would, its run dir
    ``output_dir``. Hydra's own node is kept and made current (``HydraConfig``), so the ``${hydra:...}``
    interpolations of the config resolve and the run records ``overrides`` as its command."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = hydra_compose("train", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.output_dir = str(output_dir)
    return cfg
