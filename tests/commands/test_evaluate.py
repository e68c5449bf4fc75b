"""Scoring a model on any labelled file (tagger evaluate MODEL --input FILE), and predict's output formats read back."""
from __future__ import annotations

import json

import pytest

from tagger.commands.evaluate import main as evaluate_main
from tagger.commands.predict import main as predict_main


def scores(tmp_path, argv: list[str]) -> dict:
    out = tmp_path / "scores.json"
    assert evaluate_main([*argv, "--output", str(out)]) == 0
    return json.loads(out.read_text())


def test_conllu_file_scores_as_the_run_scored_its_test_split(tmp_path, tiny_pos_run, tiny_data, capsys):
    got = scores(tmp_path, [str(tiny_pos_run), "--input", str(tiny_data / "ud_english_ewt" / "en_ewt-ud-test.conllu"),
                            "--format", "conllu"])
    run = json.loads((tiny_pos_run / "metrics.json").read_text())
    assert got["task"] == "pos" and got["metrics"]["acc"] == pytest.approx(run["test"]["acc"])
    assert f"accuracy {run['test']['acc']:.2f}" in capsys.readouterr().out


def test_column_file_gives_entity_f1_per_type(tmp_path, tiny_ner_run, tiny_data, capsys):
    got = scores(tmp_path, [str(tiny_ner_run), "--input", str(tiny_data / "conll2003" / "eng.testb"),
                            "--format", "conll", "--scheme", "IOB1"])
    run = json.loads((tiny_ner_run / "metrics.json").read_text())
    assert got["metrics"]["f1"] == pytest.approx(run["test"]["f1"])
    assert set(got["metrics"]["per_type"]) <= {"PER", "LOC"} and got["metrics"]["per_type"]
    printed = capsys.readouterr().out
    assert "entity F1" in printed and "PER" in printed


def _conllu(path, sentences):
    lines = []
    for sent in sentences:
        lines += [f"{i}\t{w}\t_\t{t}\t_\t_\t0\tdep\t_\t_" for i, (w, t) in enumerate(sent, 1)] + [""]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_tag_the_model_never_saw_is_named_or_counted_wrong(tmp_path, tiny_pos_run, capsys):
    f = _conllu(tmp_path / "x.conllu", [[("the", "DET"), ("cat", "NOUN")], [("a", "DET"), ("dog", "CANINE")]])
    assert evaluate_main([str(tiny_pos_run), "--input", str(f), "--format", "conllu"]) == 1
    err = capsys.readouterr().err
    assert "'CANINE'" in err and "x.conllu:" in err  # the tag and the sentence it first occurs in
    got = scores(tmp_path, [str(tiny_pos_run), "--input", str(f), "--format", "conllu", "--unknown-tags", "wrong"])
    assert got["metrics"]["per_tag"]["CANINE"] == {"acc": 0.0, "support": 1}
    assert got["metrics"]["acc"] <= 75.0


def test_bad_column_is_a_clear_error(tmp_path, tiny_ner_run, tiny_data, capsys):
    f = tiny_data / "conll2003" / "eng.testb"
    assert evaluate_main([str(tiny_ner_run), "--input", str(f), "--format", "conll", "--tag-column", "9"]) == 1
    assert "eng.testb:" in capsys.readouterr().err


@pytest.mark.parametrize("fmt, run, extra", [("conllu", "tiny_pos_run", []),
                                             ("conll", "tiny_ner_run", ["--scheme", "IOB2"])])
def test_predicted_file_scores_100_against_itself(tmp_path, tiny_data, request, fmt, run, extra):
    """predict --output-format conll/conllu writes files the readers (and so evaluate) read back."""
    run_dir = request.getfixturevalue(run)
    text = tmp_path / "in.txt"
    text.write_text("John sees a dog in Paris. The old cat likes Mary.\n\nthe big tree finds a car\n")
    out = tmp_path / f"out.{fmt}"
    assert predict_main([str(run_dir), "--input", str(text), "--tokenize", "--output", str(out),
                         "--output-format", fmt]) == 0
    got = scores(tmp_path, [str(run_dir), "--input", str(out), "--format", fmt, *extra])
    assert got["sentences"] == 3  # the first line is two sentences
    assert got["metrics"]["acc"] == 100.0
    if fmt == "conllu":
        assert "# text = John sees a dog in Paris." in out.read_text()
        assert "SpaceAfter=No" in out.read_text()  # "Paris" before "."


def test_tab_file_with_an_empty_word_reads_with_empty_words_keep(tmp_path, tiny_ner_run, capsys):
    f = tmp_path / "tweets.conll"
    f.write_text("Mary\tB-PER\n\tO\nsees\tO\nRome\tB-LOC\n\nJohn\tB-PER\nsees\tO\n", encoding="utf-8")
    argv = [str(tiny_ner_run), "--input", str(f), "--format", "conll", "--separator", "\\t"]
    assert evaluate_main(argv) == 1
    assert f"{f}:2: empty word column" in capsys.readouterr().err
    got = scores(tmp_path, [*argv, "--empty-words", "keep"])
    assert got["sentences"] == 2 and got["metrics"]["n_gold"] == 3


def test_label_map_renames_the_models_types_before_scoring(tmp_path, tiny_ner_run, tiny_data, capsys):
    f = tmp_path / "places.conll"
    f.write_text("Mary B-PERSON\nsees O\nRome B-LOC\n", encoding="utf-8")
    argv = [str(tiny_ner_run), "--input", str(f), "--format", "conll"]
    assert evaluate_main(argv) == 1 and "'B-PERSON'" in capsys.readouterr().err  # a type the model never had
    mapped = scores(tmp_path, [*argv, "--label-map", "PER=PERSON"])
    dropped = scores(tmp_path, [*argv, "--label-map", "PER=PERSON,LOC=O", "--unknown-tags", "wrong"])
    assert mapped["metrics"]["per_type"]["PERSON"]["support"] == 1 and "PER" not in mapped["metrics"]["per_type"]
    assert dropped["metrics"]["per_type"]["LOC"]["recall"] == 0  # the model's LOC entities were dropped
    assert evaluate_main([*argv, "--label-map", "PER"]) == 1
    assert "NAME=NAME" in capsys.readouterr().err


def test_a_latin1_file_is_named_by_line_and_read_with_encoding(tmp_path, tiny_ner_run, capsys):
    f = tmp_path / "latin1.conll"
    f.write_bytes("Mary B-PER\nsees O\n\nJosé B-PER\nsees O\n".encode("latin-1"))
    argv = [str(tiny_ner_run), "--input", str(f), "--format", "conll"]
    assert evaluate_main(argv) == 1
    err = capsys.readouterr().err
    assert f"{f}:4: bytes b'\\xe9' are not valid utf-8" in err and "--encoding" in err
    assert scores(tmp_path, [*argv, "--encoding", "latin-1"])["sentences"] == 2
    assert evaluate_main([*argv, "--encoding", "latin-9000"]) == 1
    assert "--encoding: unknown encoding 'latin-9000'" in capsys.readouterr().err
