from __future__ import annotations

import json

from tagger.report.results import main


def _run(d, model, seed, dev, test):
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "task": "pos", "data": "ud_ewt", "model": model, "head": "softmax", "seed": seed, "main_metric": "acc",
        "dev": {"acc": dev}, "test": {"acc": test}, "params": 1000, "train_seconds": 10.0, "epochs": 3,
        "command": f"python -m tagger.train model={model} seed={seed}"}))


def test_results_lines_replace_not_duplicate_and_markdown_aggregates(tmp_path):
    sweep = tmp_path / "sweep"
    _run(sweep / "a", "bilstm", 1, 90.0, 89.0)
    _run(sweep / "b", "bilstm", 2, 92.0, 91.0)
    (sweep / "failed").mkdir()  # no metrics.json: not a finished run
    out = tmp_path / "reports"
    main([str(sweep), "--out", str(out)])
    main([str(sweep / "a"), "--out", str(out)])  # re-adding a run replaces its line
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and {l["seed"] for l in lines} == {1, 2}
    assert lines[0]["dev"] in (90.0, 92.0) and "command" in lines[0]
    md = (out / "results.md").read_text()
    assert "91.00 ± 1.41" in md and "90.00 ± 1.41" in md  # mean ± sample std of (90, 92) and (89, 91)


def test_a_failure_while_writing_leaves_both_files_as_they_were(tmp_path, monkeypatch):
    """results.jsonl and results.md change together or not at all: an error while rendering the new
    table (after the new lines are known) must not leave a results.jsonl that results.md does not show."""
    import tagger.report.results

    _run(tmp_path / "sweep" / "a", "bilstm", 1, 90.0, 89.0)
    out = tmp_path / "reports"
    main([str(tmp_path / "sweep"), "--out", str(out)])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _run(tmp_path / "sweep2" / "b", "bilstm", 2, 92.0, 91.0)

    def broken(lines):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tagger.report.results, "render_markdown", broken)
    try:
        main([str(tmp_path / "sweep2"), "--out", str(out)])
    except RuntimeError:
        pass
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file left either


def test_comparison_table_pools_variants_and_means_dev_over_corpora():
    from tagger.report.results import render_comparison

    def line(data, model, variant, seed, dev, test):
        return {"task": "ner", "data": data, "model": model, "variant": variant, "seed": seed, "dev": dev, "test": test}

    lines = [line("a", "m", "old name", 1, 80.0, 70.0), line("a", "m", "scratch", 2, 82.0, 72.0),
             line("b", "m", "scratch", 1, 60.0, 50.0), line("a", "m", "vectors", 1, 90.0, 85.0),
             line("a", "m", "something else", 1, 99.0, 99.0)]
    md = render_comparison(lines, [("scratch", ["scratch", "old name"]), ("vectors", ["vectors"])], "T")
    assert "| ner | a | m | 81.00 ± 1.41 | 71.00 ± 1.41 | 2 | 90.00 | 85.00 | 1 |" in md
    assert "| ner | b | m | 60.00 | 50.00 | 1 | – | – | 0 |" in md
    # mean dev over corpora a and b: (81 + 60) / 2 for scratch; vectors lacks corpus b
    assert "| ner | m | 70.50 | – | a, b |" in md
    assert "99.00" not in md


def test_a_multi_task_run_gives_one_line_per_task_with_that_tasks_scores(tmp_path, tiny_multitask_run):
    out = tmp_path / "reports"
    main([str(tiny_multitask_run), "--out", str(out)])
    lines = {l["task"]: l for l in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    metrics = json.loads((tiny_multitask_run / "metrics.json").read_text())
    assert set(lines) == set(metrics["tasks"].values())
    for name, kind in metrics["tasks"].items():
        key = lines[kind]["metric"]
        assert lines[kind]["dev"] == round(metrics["dev"][name][key], 2)
        assert lines[kind]["test"] == round(metrics["test"][name][key], 2)
        assert lines[kind]["variant"].startswith("multi-task: ")
    assert lines["pos"]["data"] != lines["ner"]["data"]
