"""tagger.report on fake run dirs written here (tables, best-by-dev, failed and missing runs, outputs)
and on real tiny trained runs (re-evaluation: length buckets, attention maps, extrapolation)."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from tagger.report.build import main as report_main
from tagger.report.stats import bucket_edges, bucket_scores, fmt, mean_std
from tagger.report.sweeps import find_runs, read_curve
from tagger.report.variants import assign_variants
from tests.conftest import CONF_DIR, compose, train_tiny

torch.set_num_threads(1)

TAGS = {"NOUN": 50, "VERB": 30, "DET": 20}


def fake_run(root: Path, name: str, model: str, seed: int, dev: float, test: float, *, params: int = 1000,
             fit: float = 100.0, tps: float = 500.0, overrides: list[str] | None = None,
             model_cfg: dict | None = None, curve: list[float] | None = None) -> Path:
    """A POS run dir as tagger.train writes it: .hydra/, metrics.json, csv/metrics.csv."""
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "config.yaml").write_text(f"seed: {seed}\n")
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides or [f"model={model}", f"seed={seed}"]))
    split = lambda v: {"acc": v, "acc_seen": v + 1, "acc_unseen": v - 10, "n_tokens": 100, "n_unseen": 10,  # noqa: E731
                       "per_tag": {t: {"acc": v - i, "support": n} for i, (t, n) in enumerate(TAGS.items())},
                       "predict_tokens_per_s": 1000.0}
    config = {"model": {"_target_": f"fake.{model}", "hidden": 8, **(model_cfg or {})},
              "head": {"_target_": "tagger.models.heads.SoftmaxHead"},
              "data": {"task": "pos", "max_train_len": None, "seed": seed, "corpus": {"data_dir": "nowhere"}},
              "trainer": {"max_epochs": 3, "default_root_dir": str(d)}, "seed": seed, "output_dir": str(d),
              "model_name": model, "head_name": "softmax", "data_name": "fake"}
    metrics = {"task": "pos", "data": "fake", "model": model, "head": "softmax", "seed": seed, "main_metric": "acc",
               "params": params, "epochs": 3, "global_steps": 30, "best_checkpoint": str(d / "checkpoints" / "best.ckpt"),
               "best_epoch": 2, "fit_seconds": fit, "train_seconds": fit * 0.8, "train_tokens": 1000,
               "train_tokens_per_s": tps, "threads": 1, "command": f"python -m tagger.train {' '.join(overrides or [])}",
               "config": config, "dev": split(dev), "test": split(test)}
    (d / "metrics.json").write_text(json.dumps(metrics))
    (d / "csv").mkdir()
    curve = curve or [dev - 4, dev - 1, dev]
    lines = ["epoch,lr-AdamW,step,train/loss,val/acc", ",0.001,0,,"]
    for e, v in enumerate(curve):
        lines += [f"{e},,{10 * e + 5},1.5,", f"{e},,{10 * e + 9},,{v}"]
    (d / "csv" / "metrics.csv").write_text("\n".join(lines) + "\n")
    return d


def failed_run(root: Path, name: str, overrides: list[str], model_choice: str | None = None) -> Path:
    """What a killed job leaves: .hydra/ only (and an error in train.log)."""
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "config.yaml").write_text("seed: 3\n")
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if model_choice:
        (d / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": {"model": model_choice}}}}))
    (d / "train.log").write_text("[2026-01-01][__main__][INFO] - model: ...\nRuntimeError: out of memory\n")
    return d


def write_sweep(d: Path, params: dict[str, str], task: list[str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {
        "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": params},
        "overrides": {"task": task}}}))


def row(md: str, variant: str) -> list[str]:
    """Cells of the first markdown table row whose first cell is `variant`."""
    line = next(ln for ln in md.splitlines() if ln.startswith(f"| `{variant}` |"))
    return [c.strip() for c in line.strip("|").split("|")]


def run_report(tmp_path: Path, paths: list[Path], *extra: str) -> tuple[str, Path]:
    out = tmp_path / "out"
    assert report_main([*map(str, paths), "--out", str(out), "--threads", "1", *extra]) == 0
    return (out / "report.md").read_text(), out


@pytest.fixture
def compare_sweep(tmp_path) -> Path:
    """window_fc x 3 seeds, bilstm x 3 seeds; bilstm seed 3 failed; self_attention seed 1 never started."""
    sweep = tmp_path / "multirun" / "compare"
    write_sweep(sweep, {"model": "window_fc,bilstm,self_attention", "seed": "1,2,3"}, ["experiment=compare"])
    ov = lambda m, s: [f"model={m}", f"seed={s}", "experiment=compare"]  # noqa: E731
    for s, (dev, test, fit) in enumerate([(90.0, 89.0, 100.0), (92.0, 90.0, 110.0), (94.0, 94.0, 120.0)], 1):
        fake_run(sweep, f"window_fc_seed{s}", "window_fc", s, dev, test, params=2000, fit=fit, overrides=ov("window_fc", s))
    for s, (dev, test) in enumerate([(95.0, 80.0), (93.0, 99.5)], 1):  # seed 2 has the best test, seed 1 the best dev
        fake_run(sweep, f"bilstm_seed{s}", "bilstm", s, dev, test, params=3000, overrides=ov("bilstm", s))
    failed_run(sweep, "bilstm_seed3", ov("bilstm", 3))
    for s in (2, 3):
        fake_run(sweep, f"self_attention_seed{s}", "self_attention", s, 91.0 + s, 90.0, overrides=ov("self_attention", s))
    return sweep


def test_mean_std_uses_sample_std():
    assert mean_std([90.0, 92.0, 94.0]) == (92.0, 2.0)
    assert mean_std([5.0, None]) == (5.0, None)
    assert mean_std([]) == (None, None)
    assert fmt((92.0, 2.0)) == "92.00 ± 2.00" and fmt((92.0, None)) == "92.00" and fmt((None, None)) == "–"


def test_main_table_is_mean_and_std_over_seeds(tmp_path, compare_sweep):
    md, _ = run_report(tmp_path, [compare_sweep.parent], "--no-eval")
    # window_fc dev 90/92/94, test 89/90/94, fit 100/110/120: mean ± sample std worked out by hand
    cells = row(md, "window_fc")
    assert cells[1:4] == ["3/3", "92.00 ± 2.00", "91.00 ± 2.65"]
    assert cells[4] == "2,000" and cells[7] == "110 ± 10"
    assert cells[8] == "500 ± 0" and cells[9] == "–"  # train tokens/s from metrics.json; inference not measured
    # bilstm: 2 of 3 seeds done (one failed), averaged over the 2
    assert row(md, "bilstm")[1:4] == ["2/3", "94.00 ± 1.41", "89.75 ± 13.79"]
    # self_attention: seed 1 never started
    assert row(md, "self_attention")[1:3] == ["2/3", "93.50 ± 0.71"]
    # lecture order, not alphabetical
    assert md.index("| `window_fc` |") < md.index("| `bilstm` |") < md.index("| `self_attention` |")


def test_best_is_chosen_by_dev_not_test(tmp_path, compare_sweep):
    _, out = run_report(tmp_path, [compare_sweep], "--no-eval")
    best = json.loads((out / "best.json").read_text())
    # bilstm seed 1 has the highest dev (95) although bilstm seed 2 has the highest test (99.5)
    assert Path(best["run_dir"]).name == "bilstm_seed1"
    assert best["dev"]["acc"] == 95.0 and best["test"]["acc"] == 80.0
    assert best["variant"] == "bilstm" and best["model"] == "bilstm" and best["config"]["model_name"] == "bilstm"
    assert "dev" in best["reason"] and best["selected_by"] == "dev acc"
    assert best["checkpoint"].endswith("best.ckpt")
    # the run's output dirs, absolute in its config, are relative to where the report ran
    assert best["config"]["output_dir"] == os.path.relpath(compare_sweep / "bilstm_seed1")
    assert best["config"]["trainer"]["default_root_dir"] == best["config"]["output_dir"]


def test_failed_and_never_started_runs_are_listed(tmp_path, compare_sweep):
    md, _ = run_report(tmp_path, [compare_sweep], "--no-eval")
    section = md[md.index("## Runs without results"):md.index("## 1.")]
    failed = next(ln for ln in section.splitlines() if "bilstm_seed3" in ln)
    assert "no metrics.json" in failed and "model=bilstm seed=3 experiment=compare" in failed
    assert "RuntimeError: out of memory" in failed
    assert "never started: `model=self_attention seed=1 experiment=compare`" in section
    # and in the table of every run
    assert re.search(r"\| `[^`]*bilstm_seed3` \| `bilstm` \| 3 \| no results \|", md)


def test_only_failed_runs_of_a_variant_still_get_a_row(tmp_path):
    fake_run(tmp_path / "runs", "a1", "window_fc", 1, 90.0, 90.0)
    failed_run(tmp_path / "runs", "b1", ["model=bilstm", "seed=1"])
    failed_run(tmp_path / "runs", "c1", ["ablation.variant=dot", "seed=1"], model_choice="self_attention")
    md, _ = run_report(tmp_path, [tmp_path / "runs"], "--no-eval")
    assert row(md, "bilstm")[1:4] == ["0/1", "–", "–"]
    assert row(md, "self_attention [ablation.variant=dot]")[1:4] == ["0/1", "–", "–"]


def test_outputs_are_written_and_html_embeds_every_figure(tmp_path, compare_sweep):
    md, out = run_report(tmp_path, [compare_sweep], "--no-eval")
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert {"main.png", "per_tag.png", "seen_unseen.png", "learning_curves.png"} <= set(pngs)
    for name in pngs:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in md  # linked from report.md
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(pngs)
    assert not re.search(r'src="(?!data:)', page)  # nothing external: the file stands alone
    assert "<table>" in page and "&lt;" not in page.split("<body>")[0]
    # commands: the sweep's and each run's
    assert "python -m tagger.train -m experiment=compare" in md
    assert "python -m tagger.train model=window_fc seed=2 experiment=compare" in md


def test_rerun_removes_stale_figures(tmp_path, compare_sweep):
    _, out = run_report(tmp_path, [compare_sweep], "--no-eval")
    (out / "attention_7.png").write_bytes(b"old")
    run_report(tmp_path, [compare_sweep], "--no-eval")
    assert not (out / "attention_7.png").exists()


def test_curves_read_the_validation_rows_only(tmp_path):
    d = fake_run(tmp_path, "r", "bilstm", 1, 90.0, 90.0, curve=[70.0, 80.0, 85.0, 90.0])
    assert read_curve(d / "csv" / "metrics.csv", "acc") == [(0, 9, 70.0), (1, 19, 80.0), (2, 29, 85.0), (3, 39, 90.0)]


def test_ablation_variants_are_labelled_by_what_differs(tmp_path):
    base = {"pos_encoding": "relative", "pos_combine": "add", "score": "scaled_dot", "window": None, "heads": 2}
    variants = {"base": {}, "learned": {"pos_encoding": "learned"}, "dot": {"score": "dot"}, "window3": {"window": 3}}
    for i, (name, change) in enumerate(variants.items()):
        for seed in (1, 2):
            fake_run(tmp_path / "abl", f"{name}_seed{seed}", "self_attention", seed, 90.0 + i + seed, 88.0,
                     model_cfg=base | change, overrides=[f"ablation.variant={name}", f"seed={seed}"])
    md, out = run_report(tmp_path, [tmp_path / "abl"], "--no-eval")
    runs, _ = find_runs([tmp_path / "abl"])
    assign_variants(runs)
    labels = {r.variant for r in runs}
    assert "self_attention pos_encoding=learned score=scaled_dot window=null" in labels
    assert "self_attention pos_encoding=relative score=dot window=null" in labels
    section = md[md.index("## 5."):md.index("## 6.")]
    base_row = next(ln for ln in section.splitlines() if "| baseline |" in ln)
    assert base_row.startswith("| relative | add | scaled_dot | null | softmax | – | 2 | 91.50 ± 0.71 |")
    learned_row = next(ln for ln in section.splitlines() if ln.startswith("| **learned** |"))
    assert "| 92.50 ± 0.71 | 1.00 |" in learned_row  # Δ dev = 92.5 - 91.5
    assert (out / "ablation.png").exists()


def test_runs_of_different_experiments_are_labelled_by_their_overrides(tmp_path):
    # an experiment changes many config values; the label is what the command lines differ in
    tuned = {"dropout": 0.3, "layers": 4, "window": 3}
    for seed in (1, 2):
        fake_run(tmp_path / "r", f"plain{seed}", "self_attention", seed, 90.0, 88.0,
                 overrides=["experiment=compare_pos", "model=self_attention", "embedder=glove", f"seed={seed}"])
        fake_run(tmp_path / "r", f"best{seed}", "self_attention", seed, 91.0, 89.0, model_cfg=tuned,
                 overrides=["experiment=pos_best", "embedder=glove", f"seed={seed}"])
        fake_run(tmp_path / "r", f"swa{seed}", "self_attention", seed, 91.5, 89.0, model_cfg=tuned | {"swa": True},
                 overrides=["experiment=pos_best", "embedder=glove", "callbacks=swa", f"seed={seed}"])
    runs, _ = find_runs([tmp_path / "r"])
    assign_variants(runs)
    assert {r.path.name: r.variant for r in runs} == {
        "plain1": "self_attention experiment=compare_pos", "plain2": "self_attention experiment=compare_pos",
        "best1": "self_attention experiment=pos_best", "best2": "self_attention experiment=pos_best",
        "swa1": "self_attention experiment=pos_best callbacks=swa",
        "swa2": "self_attention experiment=pos_best callbacks=swa"}


def test_fine_tuned_runs_name_their_source_by_corpus_and_model_and_its_dev_score_where_two_share_them(tmp_path):
    sources = {"a": ("/x/src_a", "conll2003", 92.98), "b": ("/x/src_b", "conll2003", 93.41),
               "c": ("/x/src_c", "ud_ewt", 95.3)}
    for name, (source, data, dev) in sources.items():
        d = fake_run(tmp_path / "r", name, "self_attention", 1, 90.0, 88.0,
                     overrides=["experiment=ner_finetune", f"init_from={source}", "seed=1"])
        metrics = json.loads((d / "metrics.json").read_text())
        metrics["init_from"] = {"source": source, "data": data, "model": "self_attention_ner", "dev": dev}
        metrics["config"]["init_from"] = source
        (d / "metrics.json").write_text(json.dumps(metrics))
    runs, _ = find_runs([tmp_path / "r"])
    assign_variants(runs)
    assert {r.path.name: r.variant for r in runs} == {
        "a": "self_attention init_from=conll2003:self_attention_ner@dev92.98",
        "b": "self_attention init_from=conll2003:self_attention_ner@dev93.41",
        "c": "self_attention init_from=ud_ewt:self_attention_ner"}


def test_the_config_labels_runs_whose_overrides_do_not_tell_them_apart(tmp_path):
    # same experiment and overrides, different config (e.g. a default changed between runs): config values
    for name, layers in (("a", 2), ("b", 4)):
        fake_run(tmp_path / "r", name, "self_attention", 1, 90.0, 88.0, model_cfg={"layers": layers},
                 overrides=["experiment=compare_pos", "seed=1"])
    fake_run(tmp_path / "r", "c", "self_attention", 1, 90.0, 88.0, model_cfg={"layers": 2},
             overrides=["experiment=pos_best", "seed=1"])
    runs, _ = find_runs([tmp_path / "r"])
    assign_variants(runs)
    assert {r.path.name: r.variant for r in runs} == {
        "a": "self_attention layers=2", "b": "self_attention layers=4", "c": "self_attention layers=2"}


def test_checkpoint_plumbing_and_keys_absent_from_older_runs_do_not_make_variants(tmp_path):
    # a run made before the config gained a key with the older behaviour as its default, or with other checkpoint
    # writing: the same model, so no label; a real difference beside them still labels the runs
    for name, extra in (("old", {}), ("new", {"transfer": {"task": None}, "optimizer": {"fused": True},
                                              "callbacks": {"last_checkpoint": {"filename": "last"}}})):
        d = fake_run(tmp_path / "r", name, "self_attention", 1, 90.0, 88.0, overrides=["experiment=pos", "seed=1"])
        metrics = json.loads((d / "metrics.json").read_text())
        metrics["config"] |= extra
        if name == "new":
            metrics["config"]["data"]["corpus"]["encoding"] = "utf-8"
        (d / "metrics.json").write_text(json.dumps(metrics))
    runs, _ = find_runs([tmp_path / "r"])
    assign_variants(runs)
    assert {r.variant for r in runs} == {"self_attention"}
    fake_run(tmp_path / "r", "latin", "self_attention", 1, 90.0, 88.0, overrides=["experiment=pos", "seed=1"])
    d = tmp_path / "r" / "latin"
    metrics = json.loads((d / "metrics.json").read_text())
    metrics["config"]["data"]["corpus"]["encoding"] = "latin-1"
    (d / "metrics.json").write_text(json.dumps(metrics))
    runs, _ = find_runs([tmp_path / "r"])
    assign_variants(runs)
    assert {r.path.name: r.variant for r in runs}["latin"] == "self_attention data.corpus.encoding=latin-1"


def test_a_multi_task_source_is_named_as_such_not_as_its_first_task(tmp_path):
    d = fake_run(tmp_path / "r", "ft", "self_attention", 1, 90.0, 88.0,
                 overrides=["experiment=ner_finetune", "init_from=/x/mt", "seed=1"])
    metrics = json.loads((d / "metrics.json").read_text())
    metrics["init_from"] = {"source": "/x/mt", "data": "multitask", "model": "self_attention_ner", "task": "pos",
                            "source_task": "ner"}
    (d / "metrics.json").write_text(json.dumps(metrics))
    md, _ = run_report(tmp_path, [tmp_path / "r"], "--no-eval")
    assert "not scored: a multi-task model (its ner head started this run)" in md
    assert "(cross-task)" not in md


def test_bad_inputs_are_named(tmp_path, capsys):
    assert report_main([str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "nope: no such run or sweep dir" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    fake_run(tmp_path / "mixed", "pos", "bilstm", 1, 90.0, 90.0)
    ner = fake_run(tmp_path / "mixed", "ner", "bilstm", 1, 90.0, 90.0)
    m = json.loads((ner / "metrics.json").read_text())
    (ner / "metrics.json").write_text(json.dumps(m | {"task": "ner", "main_metric": "f1", "dev": {"f1": 90.0}, "test": {"f1": 90.0}}))
    assert report_main([str(tmp_path / "mixed"), "--out", str(tmp_path / "o"), "--no-eval"]) == 2
    assert "different tasks" in capsys.readouterr().err


def test_length_buckets_end_at_the_longest_sentence():
    assert bucket_edges((10, 20, 30, 40, 60), 75) == [(1, 10), (11, 20), (21, 30), (31, 40), (41, 60), (61, 75)]
    assert bucket_edges((10, 20, 30), 14) == [(1, 10), (11, 14)]
    gold = [["A"] * 3, ["A"] * 12, ["A"] * 13]
    pred = [["A"] * 3, ["A"] * 11 + ["B"], ["B"] * 13]
    scores = bucket_scores("pos", None, gold, pred, [(1, 10), (11, 20)])
    assert scores[0] == {"score": 100.0, "n_sent": 1, "n_tok": 3}
    assert scores[1]["n_tok"] == 25 and scores[1]["score"] == pytest.approx(100 * 11 / 25)


# -- real tiny runs, re-evaluated from their checkpoints ------------------------------------------


def test_report_on_a_real_run_reevaluates_its_checkpoint(tmp_path, tiny_pos_run):
    run = tmp_path / "runs" / "sa_seed1"
    shutil.copytree(tiny_pos_run, run)  # the run dir as given; its best checkpoint path still resolves
    md, out = run_report(tmp_path, [tmp_path / "runs"])
    assert (out / "length_buckets.png").exists() and (out / "attention_1.png").exists()
    assert "## 3. Sentence length and unseen words" in md and re.search(r"\| 1–[5-8] \(12 sent", md)
    cells = row(md, "self_attention")
    assert cells[9] not in ("–", "") and float(cells[9].replace(",", "")) > 0  # inference tokens/s measured
    # the re-evaluated test accuracy agrees with metrics.json (no mismatch note)
    assert "differs from metrics.json" not in md
    cache = list((out / "cache").glob("*.json.gz"))
    assert len(cache) == 1
    stamp = cache[0].stat().st_mtime_ns
    run_report(tmp_path, [tmp_path / "runs"])
    assert cache[0].stat().st_mtime_ns == stamp  # second report read the cache
    import tagger.report.evaluation as evaluation

    with pytest.MonkeyPatch.context() as mp:  # the prediction code changed: the run is evaluated again
        mp.setattr(evaluation, "prediction_code_hash", lambda: "another version of the code")
        run_report(tmp_path, [tmp_path / "runs"])
    assert cache[0].stat().st_mtime_ns != stamp
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(list(out.glob("*.png")))


def test_length_extrapolation_section_on_tiny_learned_run(tmp_path, tiny_data):
    """learned positions trained on sentences of <= 6 tokens: whole-sentence and windowed predictions."""
    small = ["model=self_attention", "model.d_model=16", "model.heads=2", "model.ffn_dim=16", "model.layers=1",
             "data.max_train_len=6"]
    for enc in ("learned", "sinusoidal"):
        train_tiny(tmp_path / "ext" / enc, tiny_data, [*small, f"model.pos_encoding={enc}"])
    md, out = run_report(tmp_path, [tmp_path / "ext"], "--edges", "4,8")
    section = md[md.index("## 7."):md.index("## 8.")]
    assert (out / "length_extrapolation.png").exists()
    assert "| learned, whole sentence |" in section and "| learned, 6-token windows |" in section
    assert "| sinusoidal |" in section
    assert "were never trained" in section and "overlapping 6-token windows" in section


# -- experiment configs ---------------------------------------------------------------------------


def test_ablation_config_sets_one_factor_per_variant(tmp_path, tiny_data):
    cfg = compose([f"data_dir={tiny_data}", "experiment=ablate_attention"], tmp_path)
    variants = cfg.ablation.variants
    assert set(cfg.hydra.sweeper.params["ablation.variant"].split(",")) == set(variants)
    base = dict(variants.base)
    for name, v in variants.items():
        changed = {k for k in base if v[k] != base[k]}
        assert len(changed) == (0 if name == "base" else 1 if name != "sinusoidal_concat" else 2), (name, changed)
        cfg = compose([f"data_dir={tiny_data}", "experiment=ablate_attention", f"ablation.variant={name}"], tmp_path)
        assert {k: cfg.model[k] for k in base} == dict(v)


def test_length_extrapolation_and_optuna_configs_compose(tmp_path, tiny_data):
    cfg = compose([f"data_dir={tiny_data}", "experiment=length_extrapolation"], tmp_path)
    assert cfg.data.max_train_len == 20
    assert set(str(cfg.hydra.sweeper.params["model.pos_encoding"]).split(",")) == {"sinusoidal", "learned", "relative", "alibi"}
    cfg = compose([f"data_dir={tiny_data}", "hparams_search=optuna_self_attention"], tmp_path)
    assert cfg.search.direction == "maximize" and "model.d_model" in cfg.search.params  # read by tagger tune
    assert Path(CONF_DIR, "hparams_search", "optuna_self_attention.yaml").exists()


def test_ner_report_has_per_type_scores_and_f1_by_length(tmp_path, tiny_ner_run):
    md, out = run_report(tmp_path, [tiny_ner_run])
    section = md[md.index("## 2. Per-type"):md.index("## 3.")]
    assert re.search(r"^\| LOC \| \d+ \|", section, re.M) and re.search(r"^\| PER \| \d+ \|", section, re.M)
    assert (out / "per_type.png").exists() and (out / "length_buckets.png").exists()
    assert "entity F1" in md and "differs from metrics.json" not in md
    assert json.loads((out / "best.json").read_text())["main_metric"] == "f1"


def test_html_is_the_markdown_rendered_with_figures_inlined(tmp_path):
    from tagger.report.document import Doc

    png = tmp_path / "fig.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    doc = Doc()
    doc.h(2, "Scores <raw>")
    doc.table(["variant", "dev"], [["`a|b`", "92.10 ± 0.31"]], "caption with **bold**")
    doc.figure(png, "a figure")
    md = doc.markdown()
    assert "| `a\\|b` | 92.10 ± 0.31 |" in md and "![fig](fig.png)" in md
    page = doc.html("title")
    assert "<h2>Scores &lt;raw&gt;</h2>" in page  # text is escaped, never taken as HTML
    assert "<code>a|b</code>" in page and '<td class="num">92.10 ± 0.31</td>' in page
    assert "<em>caption with <strong>bold</strong></em>" in page
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in page


def test_unseen_words_of_a_vectors_model_split_by_whether_the_vectors_cover_them(tmp_path, tiny_data):
    from tests.data.test_vectors import DIM, write_vectors

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    test = data / "ud_english_ewt" / "en_ewt-ud-test.conllu"
    words = ["the", "zebra", "sees", "an", "okapi"]  # zebra: only the vectors know it; okapi: nobody does
    test.write_text(test.read_text() + "# sent_id = extra\n" + "".join(
        f"{j}\t{w}\t{w}\t{t}\t_\t_\t0\tdep\t_\t_\n" for j, (w, t) in
        enumerate(zip(words, ["DET", "NOUN", "VERB", "DET", "NOUN"]), 1)) + "\n")
    vec = write_vectors(tmp_path / "v.txt", words=["zebra"])
    run = train_tiny(tmp_path / "runs" / "glove_seed1", data, [
        f"embedder.vectors={vec}", f"embedder.word_dim={DIM}", "model=bilstm", "model.hidden_dim=16",
        "trainer.max_epochs=1"])
    out = tmp_path / "out"
    assert report_main([str(run.parent), "--out", str(out), "--threads", "1", "--data-dir", str(data)]) == 0
    md = (out / "report.md").read_text()
    assert "| unseen, in the vectors | unseen, in neither (UNK) |" in md
    seen_table = md[md.index("| variant | seen words | unseen words | unseen, in the vectors"):]
    first_row = seen_table.splitlines()[2]
    n_vec, n_unk = first_row.strip("|").split("|")[-1].strip().split(" / ")
    assert int(n_vec) == 1  # zebra
    assert int(n_unk.replace(",", "")) >= 1  # okapi, and any word of the generated test sentences unseen in training


def test_the_evaluation_cache_key_covers_the_code_predictions_come_from():
    """Every project module whose functions or classes the predictor and the scoring use is hashed into the cache
    key (tagger.report.evaluation.PREDICTION_CODE), so a change to any of them measures cached runs again."""
    import inspect

    import tagger
    import tagger.inference.predictor
    import tagger.inference.scoring
    from tagger.report.evaluation import PREDICTION_CODE

    root = Path(tagger.__file__).resolve().parent
    used = {inspect.getmodule(v) for m in (tagger.inference.predictor, tagger.inference.scoring)
            for v in vars(m).values() if inspect.isfunction(v) or inspect.isclass(v)}
    files = {Path(m.__file__).resolve().relative_to(root).as_posix() for m in used
             if m is not None and m.__name__.startswith("tagger.")}
    assert "inference/word_features.py" in files and "schemes.py" in files
    uncovered = [f for f in files if not any(f == c or f.startswith(c + "/") for c in PREDICTION_CODE)]
    assert uncovered == []
    assert [c for c in PREDICTION_CODE if not (root / c).exists()] == []  # every entry names a file or folder

