"""`tagger evaluate --task` and `tagger predict` on a model of two tasks."""
from __future__ import annotations

import json

import tagger
from tagger.commands.evaluate import main as evaluate_main
from tagger.commands.predict import main as predict_main


def test_evaluate_scores_the_named_task_on_a_file(tiny_multitask_run, tiny_data, tmp_path):
    nlp = tagger.load(tiny_multitask_run)
    for task, args in (("ner", ["--input", str(tiny_data / "conll2003" / "eng.testb"), "--format", "conll",
                                "--scheme", "IOB1"]),
                       ("pos", ["--input", str(tiny_data / "ud_english_ewt" / "en_ewt-ud-test.conllu"),
                                "--format", "conllu"])):
        out = tmp_path / f"{task}.json"
        assert evaluate_main([str(tiny_multitask_run), *args, "--task", task, "--output", str(out)]) == 0
        scores = json.loads(out.read_text())
        assert scores["task"] == task and scores["model_task"] == task
        # the score of the task's own head: what the run recorded on the same test split
        recorded = json.loads((tiny_multitask_run / "metrics.json").read_text())["test"][task]
        main = "f1" if task == "ner" else "acc"
        assert abs(scores["metrics"][main] - recorded[main]) < 1e-6
    assert set(nlp.task_labels("ner")) >= {"B-PER", "I-LOC"}


def test_evaluate_a_multitask_model_without_task_names_its_tasks(tiny_multitask_run, tiny_data, capsys):
    path = str(tiny_data / "conll2003" / "eng.testb")
    assert evaluate_main([str(tiny_multitask_run), "--input", path, "--format", "conll", "--scheme", "IOB1"]) == 1
    assert "--task" in capsys.readouterr().err
    assert evaluate_main([str(tiny_multitask_run), "--input", path, "--format", "conll", "--task", "chunk"]) == 1
    err = capsys.readouterr().err
    assert "chunk" in err and "pos, ner" in err


def test_evaluate_a_multitask_run_again_scores_each_task(tiny_multitask_run, capsys):
    assert evaluate_main([str(tiny_multitask_run)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    recorded = json.loads((tiny_multitask_run / "metrics.json").read_text())
    assert printed["metric"] == "tasks_mean"
    assert abs(printed["dev"] - recorded["dev"]["tasks_mean"]) < 0.01


def test_predict_writes_every_task_in_jsonl_and_conllu(tiny_multitask_run, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("John sees the cat in New York .\nMary likes a tree\n", encoding="utf-8")
    jsonl, conllu = tmp_path / "out.jsonl", tmp_path / "out.conllu"
    assert predict_main([str(tiny_multitask_run), "--input", str(src), "--output", str(jsonl)]) == 0
    assert predict_main([str(tiny_multitask_run), "--input", str(src), "--output", str(conllu),
                         "--output-format", "conllu"]) == 0
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert set(line["tasks"]) == {"pos", "ner"}
        assert len(line["tasks"]["pos"]["tags"]) == len(line["tasks"]["ner"]["tags"]) == len(line["tokens"])
        assert "spans" in line["tasks"]["ner"] and "spans" not in line["tasks"]["pos"]
    rows = [r.split("\t") for r in conllu.read_text().splitlines() if r and not r.startswith("#")]
    upos = [r[3] for r in rows]
    ner = [dict(kv.split("=") for kv in r[9].split("|"))["NER"] for r in rows]
    assert upos == [t for line in lines for t in line["tasks"]["pos"]["tags"]]
    assert ner == [t for line in lines for t in line["tasks"]["ner"]["tags"]]


def test_predict_raw_text_tags_every_task(tiny_multitask_run, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("John sees the state-of-the-art cat. Mary likes Paris.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert predict_main([str(tiny_multitask_run), "--input", str(src), "--tokenize", "--output", str(out)]) == 0
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert "state-of-the-art" in line["tokens"]  # the model's one convention keeps hyphenated words whole
    assert len(line["sentences"]) == 2
    assert len(line["tasks"]["pos"]["tags"]) == len(line["tasks"]["ner"]["tags"]) == len(line["tokens"])
