"""tagger.report on multi-task runs (one task's side per report, --task) and on lines of results.jsonl
(--baseline-results, --baseline: scores only)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

import tagger.report.build as build
from tagger.report.build import main as report_main
from tagger.report.stats import fmt, mean_std
from tests.report.test_report import fake_run, row, run_report

torch.set_num_threads(1)

MT = "self_attention_ner multi-task: pos (ud_ewt) + ner (conll2003), one encoder"
POS_BASE = "experiment=compare_pos model=self_attention embedder=glove"


def copy_run(run: Path, dest: Path, dev: dict[str, float] | None = None) -> Path:
    """The run dir copied; ``dev``: the dev main metric of each task set apart (the tiny tasks both reach 100), so
    that a report showing the other task's score fails."""
    shutil.copytree(run, dest)
    if dev:
        m = json.loads((dest / "metrics.json").read_text())
        for name, value in dev.items():
            m["dev"][name][{"pos": "acc", "ner": "f1"}[name]] = value
        (dest / "metrics.json").write_text(json.dumps(m))
    return dest


def results_line(seed: int, dev: float, test: float, command: str, run_dir: str | None = None) -> dict:
    return {"task": "pos", "data": "ud_ewt", "model": "self_attention", "head": "softmax", "variant": "GloVe",
            "seed": seed, "dev": dev, "test": test, "metric": "acc", "params": 1000, "train_seconds": 10.0,
            "epochs": 15, "train_tokens_per_s": 500.0, "command": f"python -m tagger.train {command} seed={seed}",
            "run_dir": run_dir or f"multirun/elsewhere/sa_seed{seed}"}


def write_results(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("task, metric, dev", [("pos", "acc", 91.25), ("ner", "f1", 83.5)])
def test_a_multitask_run_is_reported_as_a_run_of_the_chosen_task(tmp_path, tiny_multitask_run, task, metric, dev):
    run = copy_run(tiny_multitask_run, tmp_path / "runs" / "mt_seed1", dev={"pos": 91.25, "ner": 83.5})
    md, out = run_report(tmp_path, [run.parent], "--task", task)
    truth = json.loads((run / "metrics.json").read_text())
    assert row(md, MT)[1:4] == ["1/1", f"{dev:.2f}", f"{truth['test'][task][metric]:.2f}"]
    # re-evaluated through that task's head on that task's corpus: it agrees with metrics.json
    assert "differs from metrics.json" not in md and len(list((out / "cache").glob(f"mt_seed1-{task}-*"))) == 1
    assert (out / "learning_curves.png").exists()  # from the task's val/TASK/METRIC column
    best = json.loads((out / "best.json").read_text())
    assert best["task"] == "multitask" and best["model_task"] == task and best["main_metric"] == metric
    assert best["dev"][metric] == dev
    if task == "ner":
        assert "## 2. Per-type precision" in md and "| LOC |" in md


def test_several_tasks_need_the_task_flag(tmp_path, tiny_multitask_run, tiny_pos_run, capsys):
    shutil.copytree(tiny_multitask_run, tmp_path / "runs" / "mt")
    assert report_main([str(tmp_path / "runs"), "--out", str(tmp_path / "o"), "--no-eval"]) == 2
    assert "choose it with --task (--task ner or --task pos)" in capsys.readouterr().err
    assert report_main([str(tmp_path / "runs"), "--out", str(tmp_path / "o"), "--no-eval", "--task", "upos"]) == 2
    assert "--task upos: not a task of the multi-task run" in capsys.readouterr().err
    assert report_main([str(tiny_pos_run), "--out", str(tmp_path / "o"), "--no-eval", "--task", "ner"]) == 2
    assert "--task ner: no multi-task run among the paths" in capsys.readouterr().err
    # a single-task run of the chosen task's kind sits beside the multi-task run
    shutil.copytree(tiny_pos_run, tmp_path / "runs" / "pos")
    md, _ = run_report(tmp_path, [tmp_path / "runs"], "--no-eval", "--task", "pos")
    assert row(md, "self_attention")[1] == "1/1" and row(md, MT)[1] == "1/1"


def test_the_corpus_of_a_task_is_the_one_hydra_chose(tmp_path, tiny_multitask_run):
    run = copy_run(tiny_multitask_run, tmp_path / "runs" / "mt")
    (run / ".hydra").mkdir()
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": {
        "data@tasks.pos.data": "my_ewt", "data@tasks.ner.data": "conll2003"}}}}))
    md, _ = run_report(tmp_path, [run], "--no-eval", "--task", "ner")
    assert row(md, "self_attention_ner multi-task: pos (my_ewt) + ner (conll2003), one encoder")[1] == "1/1"


def test_baseline_lines_are_runs_named_by_their_command(tmp_path, tiny_multitask_run):
    run = copy_run(tiny_multitask_run, tmp_path / "runs" / "mt", dev={"pos": 91.25, "ner": 83.5})
    extra = "~callbacks.progress_bar"
    lines = [results_line(s, dev, test, f"{POS_BASE} {extra}") for s, dev, test in
             ((1, 90.0, 89.0), (2, 92.0, 91.0), (3, 94.0, 90.0))]
    lines += [results_line(1, 99.0, 99.0, "experiment=compare_pos model=bilstm embedder=glove"),
              results_line(1, 99.0, 99.0, f"{POS_BASE} embedder.rare_word_dropout=0", "x") | {"task": "ner"}]
    results = write_results(tmp_path / "results.jsonl", lines)
    md, out = run_report(tmp_path, [run], "--no-eval", "--task", "pos", "--baseline-results", str(results),
                         "--baseline", POS_BASE)
    base = f"self_attention {POS_BASE}"
    assert row(md, base)[1:4] == ["3/3", "92.00 ± 2.00", "90.00 ± 1.00"]  # worked out by hand
    for seed in (1, 2, 3):  # each line with its command
        assert f"| `multirun/elsewhere/sa_seed{seed}` | `{base}` | {seed} | ok | " in md
        assert f"`python -m tagger.train {POS_BASE} {extra} seed={seed}` |" in md
    delta = next(ln for ln in md.splitlines() if ln.startswith(f"| `{MT}` | 1 |"))
    truth = json.loads((run / "metrics.json").read_text())["test"]["pos"]["acc"]
    assert delta.endswith(f"| {91.25 - 92.0:+.2f} | {truth - 90.0:+.2f} |")
    assert "99.00" not in md  # another command's line, another task's line
    assert json.loads((out / "best.json").read_text())["run_dir"] == str(run)  # a line is never the best model


def test_a_baseline_that_is_not_one_configuration_is_refused(tmp_path, tiny_multitask_run, capsys):
    cmd = f"{POS_BASE} ~callbacks.progress_bar"
    twice = write_results(tmp_path / "twice.jsonl", [results_line(1, 90.0, 89.0, cmd),
                                                     results_line(1, 91.0, 89.0, cmd, "runs/again_seed1")])
    mixed = write_results(tmp_path / "mixed.jsonl", [results_line(1, 90.0, 89.0, cmd),
                                                     results_line(2, 91.0, 89.0, f"{cmd} data=btc")])
    args = [str(tiny_multitask_run), "--out", str(tmp_path / "o"), "--no-eval", "--task", "pos"]
    assert report_main([*args, "--baseline-results", str(twice), "--baseline", POS_BASE]) == 2
    assert "several lines of one seed (seed 1: multirun/elsewhere/sa_seed1, runs/again_seed1)" in capsys.readouterr().err
    assert report_main([*args, "--baseline-results", str(mixed), "--baseline", POS_BASE]) == 2
    assert "lines of different commands" in capsys.readouterr().err
    assert report_main([*args, "--baseline-results", str(mixed), "--baseline", "experiment=compare_ner"]) == 2
    assert "no pos line of" in capsys.readouterr().err
    assert report_main([*args, "--baseline-results", str(tmp_path / "nope.jsonl"), "--baseline", POS_BASE]) == 2
    err = capsys.readouterr().err
    assert "--baseline-results" in err and "no such file" in err
    assert report_main([*args, "--baseline-results", str(mixed)]) == 2
    assert "name its runs with --baseline" in capsys.readouterr().err


def test_a_single_task_report_is_what_it_was_without_the_multitask_and_baseline_steps(tmp_path, monkeypatch):
    for seed, (dev, test) in enumerate([(90.0, 89.0), (92.0, 90.0)], 1):
        fake_run(tmp_path / "runs", f"w{seed}", "window_fc", seed, dev, test)
        fake_run(tmp_path / "runs", f"b{seed}", "bilstm", seed, dev + 1, test)

    def render(name: str) -> tuple[str, str]:
        out = tmp_path / name
        assert report_main([str(tmp_path / "runs"), "--out", str(out), "--no-eval"]) == 0
        md = (out / "report.md").read_text().replace(str(out), "OUT")
        return md.split("\n", 3)[3], (out / "best.json").read_text()  # after the line with the date

    with_steps = render("a")
    monkeypatch.setattr(build, "select_task", lambda runs, task: runs)
    monkeypatch.setattr(build, "note_multitask", lambda c: None)
    monkeypatch.setattr(build, "section_baselines", lambda c: None)
    assert render("b") == with_steps
    assert "Multi-task" not in with_steps[0] and "Baselines" not in with_steps[0]
    assert "model_task" not in with_steps[1]
