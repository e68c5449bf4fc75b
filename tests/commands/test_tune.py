"""tagger tune: the search space read from conf/hparams_search in Hydra's sweep syntax, the command line laid over it,
sampled values back as overrides, and one tiny in-memory search end to end (two processes on one SQLite study:
tests/test_hparams_search.py, slow)."""
from __future__ import annotations

import json

import optuna
import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import instantiate
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tagger.commands.tune import SearchSpaceError, as_overrides, main, search_space
from tests.conftest import FAST, compose


def _space(params: dict[str, str], overrides: list[str] = ()):
    return search_space(params, OverridesParser.create().parse_overrides(list(overrides)))


def test_the_shipped_search_space_and_sampler(tmp_path, tiny_data):
    cfg = compose([f"data_dir={tiny_data}", "hparams_search=optuna_self_attention"], tmp_path)
    assert cfg.search.direction == "maximize" and cfg.model._target_.endswith("SelfAttentionEncoder")
    space, fixed = search_space(cfg.search.params, [])
    assert fixed == []
    assert space["model.d_model"] == CategoricalDistribution([64, 128, 256])
    assert space["model.score"] == CategoricalDistribution(["scaled_dot", "dot", "additive"])
    assert space["model.dropout"] == FloatDistribution(0.0, 0.4)
    assert space["optimizer.lr"] == FloatDistribution(0.0003, 0.005, log=True)
    sampler = instantiate(cfg.search.sampler)
    assert isinstance(sampler, optuna.samplers.TPESampler)


def test_each_sweep_kind_becomes_its_distribution():
    space, _ = _space({"a": "range(1, 5)", "b": "tag(int, interval(1, 4))", "c": "tag(log, int, interval(8, 64))",
                       "d": "range(0, 10, 5)", "e": "choice(true, false)"})
    assert space["a"] == IntDistribution(1, 4)  # Hydra's range excludes its stop
    assert space["b"] == IntDistribution(1, 4)
    assert space["c"] == IntDistribution(8, 64, log=True)
    assert space["d"] == IntDistribution(0, 5, step=5)
    assert space["e"] == CategoricalDistribution([True, False])


def test_the_command_line_replaces_a_range_or_fixes_a_key():
    params = {"model.layers": "choice(1, 2, 3)", "model.dropout": "interval(0.0, 0.4)", "optimizer.lr": "interval(0.001, 0.01)"}
    space, fixed = _space(params, ["data=conll2003", "model.layers=choice(1,2)", "model.dropout=0.1", "model.heads=choice(2,4)"])
    assert list(space) == ["model.layers", "optimizer.lr", "model.heads"]  # a replaced key keeps its place
    assert space["model.layers"] == CategoricalDistribution([1, 2])
    assert fixed == ["data=conll2003", "model.dropout=0.1"]


def test_an_entry_that_is_no_sweep_is_named():
    with pytest.raises(SearchSpaceError, match="model.layers=3"):
        _space({"model.layers": "3"})


def test_sampled_values_become_overrides_hydra_reads_back():
    overrides = as_overrides({"model.d_model": 64, "model.dropout": 0.125, "optimizer.lr": 1e-05, "head.constrain": True,
                              "model.window": None, "model.score": "scaled_dot"})
    assert overrides == ["model.d_model=64", "model.dropout=0.125", "optimizer.lr=1e-05", "head.constrain=true",
                         "model.window=null", "model.score=scaled_dot"]
    values = [o.value() for o in OverridesParser.create().parse_overrides(overrides)]
    assert values == [64, 0.125, 1e-05, True, None, "scaled_dot"]


def test_without_a_search_space_or_with_an_unknown_key_nothing_runs(tmp_path, tiny_data, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([f"data_dir={tiny_data}"]) == 2
    assert "hparams_search=NAME" in capsys.readouterr().err
    assert main([f"data_dir={tiny_data}", "hparams_search=optuna_self_attention", "model.dmodel=choice(1,2)"]) == 2
    assert "model.dmodel" in capsys.readouterr().err
    assert not (tmp_path / "multirun").exists()


def test_a_tiny_search_trains_each_trial_into_its_run_dir(tmp_path, tiny_data, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main([f"data_dir={tiny_data}", "hparams_search=optuna_self_attention", *FAST, "trainer.max_epochs=1",
                 "model.d_model=32", "model.ffn_dim=32", "model.layers=1", "model.heads=choice(2,4)", "--n-trials", "2"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["study"] == "optuna_self_attention" and result["trials"] == {"COMPLETE": 2}
    sweep = tmp_path / "multirun" / "optuna_self_attention"
    assert yaml.safe_load((sweep / "optimization_results.yaml").read_text()) == result
    for n in (0, 1):
        run = json.loads((sweep / f"trial{n}" / "metrics.json").read_text())
        assert run["config"]["model"]["d_model"] == 32 and run["config"]["model"]["heads"] in (2, 4)
        # the recorded command trains the trial again; tagger report reads the overrides and the log as Hydra's
        overrides = yaml.safe_load((sweep / f"trial{n}" / ".hydra" / "overrides.yaml").read_text())
        assert run["command"] == " ".join(["python -m tagger.train", *overrides])
        assert f"model.heads={run['config']['model']['heads']}" in overrides
        assert "Seed set to 1" in (sweep / f"trial{n}" / "train.log").read_text()
    dev = [json.loads((sweep / f"trial{n}" / "metrics.json").read_text())["dev"]["acc"] for n in (0, 1)]
    best = max(range(2), key=lambda n: dev[n])  # Optuna's best trial: the first of equal values
    assert (result["best_value"], result["best_trial"]) == (pytest.approx(dev[best]), best)


def test_an_sqlite_storage_gets_its_folder(tmp_path):
    from tagger.commands.tune import storage

    url = f"sqlite:///{tmp_path / 'studies' / 'new' / 'study.db'}"
    optuna.create_study(storage=storage(url), study_name="s")
    assert optuna.load_study(study_name="s", storage=url).study_name == "s"


def _open_study(url: str, barrier, results) -> None:
    from tagger.commands.tune import storage

    barrier.wait()  # every process opens the new database at once: they race to create Optuna's tables
    try:
        optuna.create_study(storage=storage(url), study_name="s", load_if_exists=True)
        results.put("ok")
    except Exception as e:  # noqa: BLE001  (reported to the test)
        results.put(repr(e)[:300])


def test_processes_opening_a_new_database_at_once_all_get_the_study(tmp_path):
    """Plain ``RDBStorage`` fails in most of the processes that lose the race (optuna/optuna#1092)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    processes = [ctx.Process(target=_open_study, args=(url, barrier, results)) for _ in range(4)]
    for p in processes:
        p.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=60)
    assert outcomes == ["ok"] * 4
    assert len(optuna.get_all_study_summaries(storage=url)) == 1
