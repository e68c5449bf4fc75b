"""Search hyper-parameters with Optuna: ``tagger tune hparams_search=NAME [OVERRIDES...] [--storage URL]
[--study-name NAME] [--n-trials N] [--sweep-dir DIR]``.

Each trial composes the training config (``conf/train.yaml``) with the overrides and the values it samples from the
search space (``search.params`` of ``conf/hparams_search/NAME.yaml``, in Hydra's sweep syntax), trains it into
``SWEEP_DIR/trialN`` (N: the trial's number in the study) and gives the study the dev metric of its best checkpoint.
A sweep override on the command line (``model.layers='choice(1,2)'``) replaces that key's range; a plain value
(``model.layers=2``) takes the key out of the search.

Processes started with one ``--storage`` and ``--study-name`` share one study, on one machine (``sqlite:///FILE``) or
several (a PostgreSQL or MySQL URL): each asks the storage for its next trial, so every sampler sees every finished
trial, and ``--n-trials`` counts the trials of one process. Starting again with the same storage and name continues
the study. Needs the ``tune`` extra.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Transformer
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagger.fileio import write_text
from tagger.training.configs import compose

try:
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
except ImportError:  # the tune extra is not installed: main says so
    optuna = None

log = logging.getLogger(__name__)

# a process that dies in a trial (killed, preempted, machine lost) leaves it RUNNING; with a storage, every process
# beats for its running trial, and the next process to start a trial marks one whose beat is older than twice this FAIL
HEARTBEAT_S = 60
STORAGE_ATTEMPTS = 5


class SearchSpaceError(ValueError):
    """A search-space entry Optuna cannot sample (named with its config key)."""


def distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution of one sweep override: ``choice`` categorical, ``interval`` float (``tag(log, ...)``
    on a log scale, ``tag(int, ...)`` integer), ``range`` the values Hydra's range yields (its stop excluded)."""
    value = override.value()
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode)))
    if override.is_range_sweep():
        values = list(override.sweep_iterator())
        if not values:
            raise SearchSpaceError(f"search space: {override.input_line!r} holds no value")
        if all(isinstance(v, int) for v in (value.start, value.stop, value.step)):
            return IntDistribution(values[0], values[-1], step=value.step)
        return FloatDistribution(values[0], values[-1], step=value.step)
    if override.is_interval_sweep():
        log_scale = "log" in value.tags
        if "int" in value.tags:
            return IntDistribution(int(value.start), int(value.end), log=log_scale)
        return FloatDistribution(value.start, value.end, log=log_scale)
    raise SearchSpaceError(f"search space: {override.input_line!r} is not a choice, range or interval "
                           "(e.g. choice(1, 2), interval(0.0, 0.4), tag(log, interval(1e-4, 1e-2)), range(1, 5))")


def search_space(params: Mapping[str, Any],
                 overrides: Sequence[Override]) -> tuple[dict[str, BaseDistribution], list[str]]:
    """(the search space by config key, the overrides every trial takes): ``params`` (``search.params``) with the
    command line's ``overrides`` laid over them, as hydra-optuna-sweeper did: a sweep override replaces the key's
    range, a plain value takes the key out of the search."""
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    space = {o.get_key_element(): distribution(o) for o in parsed}
    fixed = []
    for o in overrides:
        if o.is_sweep_override():
            space[o.get_key_element()] = distribution(o)
        else:
            space.pop(o.get_key_element(), None)
            fixed.append(o.input_line)
    return space, fixed


def as_overrides(values: Mapping[str, Any]) -> list[str]:
    """Sampled values as Hydra overrides (``key=value``)."""
    def text(v: Any) -> str:
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    return [f"{k}={text(v)}" for k, v in values.items()]


def suggest(trial: optuna.Trial, space: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """One value per key of ``space``, sampled by the study's sampler."""
    values = {}
    for key, d in space.items():
        if isinstance(d, CategoricalDistribution):
            values[key] = trial.suggest_categorical(key, d.choices)
        elif isinstance(d, IntDistribution):
            values[key] = trial.suggest_int(key, d.low, d.high, step=d.step, log=d.log)
        else:
            values[key] = trial.suggest_float(key, d.low, d.high, step=d.step, log=d.log)
    return values


def first_values(space: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """A point of the space (each key's first choice or its low end), to check the keys before any trial runs."""
    return {k: d.choices[0] if isinstance(d, CategoricalDistribution) else d.low for k, d in space.items()}


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """The process's log also into ``path`` (a run dir's ``train.log``, where ``@hydra.main`` would put it)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    except BaseException:
        log.exception("trial failed")
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


def write_job_files(cfg: DictConfig, overrides: Sequence[str], run_dir: Path) -> None:
    """``.hydra/`` as ``@hydra.main`` writes it (config, Hydra's node, overrides): ``tagger report`` finds and names a
    trial that failed before its ``metrics.json`` from these files."""
    hydra_dir = run_dir / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    write_text(hydra_dir / "config.yaml", OmegaConf.to_yaml(task))
    write_text(hydra_dir / "hydra.yaml", OmegaConf.to_yaml({"hydra": cfg.hydra}))
    write_text(hydra_dir / "overrides.yaml", OmegaConf.to_yaml(list(overrides)))


def objective(space: Mapping[str, BaseDistribution], fixed: Sequence[str],
              sweep_dir: Path) -> Callable[[optuna.Trial], float]:
    """The function the study calls per trial: compose, train into ``sweep_dir/trialN``, return the dev metric."""
    from tagger.training.run import train

    def run(trial: optuna.Trial) -> float:
        overrides = [*fixed, *as_overrides(suggest(trial, space))]
        run_dir = sweep_dir / f"trial{trial.number}"
        trial.set_user_attr("run_dir", str(run_dir.resolve()))
        trial.set_user_attr("host", socket.gethostname())  # where run_dir is, when several machines share the study
        trial.set_user_attr("pid", os.getpid())
        cfg = compose(overrides, run_dir)
        write_job_files(cfg, overrides, run_dir)
        with log_to(run_dir / "train.log"):
            results = train(cfg)
        metric = results["main_metric"]
        dev, test = (results.get(split, {}).get(metric) for split in ("dev", "test"))
        if dev is None:
            raise RuntimeError(f"trial {trial.number}: {run_dir}/metrics.json has no dev {metric} (evaluate=false, "
                               "or a corpus without a validation split)")
        trial.set_user_attr("metric", metric)
        trial.set_user_attr("test", test)
        return dev

    return run


def storage(url: str | None) -> optuna.storages.BaseStorage | None:
    """The study's storage: None keeps it in this process's memory; an SQLAlchemy URL, a database that processes
    share (with a heartbeat, so that a trial whose process died is failed, not left running for ever). An SQLite
    file's folder is made here: SQLite creates the file, not its folder."""
    if url is None:
        return None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(STORAGE_ATTEMPTS):
        try:
            with warnings.catch_warnings():  # Optuna still marks the heartbeat experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S)
        except DBAPIError:
            # processes started together on an empty database race to create Optuna's tables, and the losers fail
            # ("table studies already exists", optuna/optuna#1092); once they exist, opening the storage succeeds
            if attempt == STORAGE_ATTEMPTS - 1:
                raise
            time.sleep(1.0 + random.random())


def summary(study: optuna.Study) -> dict[str, Any]:
    """The study so far, from the storage: every process's trials, the best of them."""
    states = [t.state.name for t in study.get_trials(deepcopy=False)]
    out: dict[str, Any] = {"study": study.study_name, "trials": {s: states.count(s) for s in sorted(set(states))}}
    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if completed:
        best = study.best_trial
        out |= {"best_trial": best.number, "best_value": best.value, "best_params": best.params,
                "best_run_dir": best.user_attrs.get("run_dir"), "best_host": best.user_attrs.get("host")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagger tune", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides: hparams_search=NAME (the search space and "
                        "its training settings), then any key=value of `tagger train` or KEY=choice(...) etc.")
    parser.add_argument("--storage", help="SQLAlchemy URL of the study's database, shared by every process of the "
                        "study: sqlite:///optuna.db (one machine), postgresql://USER@HOST/DB (several); default: "
                        "in memory, this process alone")
    parser.add_argument("--study-name", help="the study in the storage (default: the hparams_search name)")
    parser.add_argument("--n-trials", type=int, default=30, help="trials this process runs (default: %(default)s)")
    parser.add_argument("--sweep-dir", type=Path, help="where trial N trains, as SWEEP_DIR/trialN "
                        "(default: multirun/STUDY_NAME)")
    args = parser.parse_args(argv)
    if optuna is None:
        print("error: tagger tune needs the tune extra: pip install 'tagger[tune]'", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        parsed = OverridesParser.create().parse_overrides(args.overrides)
        base = compose([o.input_line for o in parsed if not o.is_sweep_override()], Path("."))
        if "search" not in base:
            raise SearchSpaceError("no search space (`search`): add hparams_search=NAME, one of conf/hparams_search/")
        space, fixed = search_space(base.search.params, parsed)
        compose([*fixed, *as_overrides(first_values(space))], Path("."))  # a key no config has fails now, not in trials
    except Exception as e:  # a bad override or search space: Hydra and SearchSpaceError name the key
        print(f"error: {e}", file=sys.stderr)
        return 2
    name = args.study_name or base.hydra.runtime.choices.hparams_search
    sweep_dir = args.sweep_dir or Path("multirun") / name
    study = optuna.create_study(storage=storage(args.storage), study_name=name, direction=base.search.direction,
                                sampler=instantiate(base.search.sampler), load_if_exists=True)
    study.optimize(objective(space, fixed, sweep_dir), n_trials=args.n_trials, gc_after_trial=True)
    result = summary(study)
    write_text(sweep_dir / "optimization_results.yaml", OmegaConf.to_yaml(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
