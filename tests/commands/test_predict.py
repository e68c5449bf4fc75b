"""Offline prediction (tagger predict): input formats, output lines, equality with the Predictor."""
from __future__ import annotations

import json

import pytest
import torch

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.commands.predict import InputError, main, read_sentences
from tagger.data.readers import read_conll_columns
from tagger.inference.predictor import Predictor
from tagger.tokenize import tokenize

torch.set_num_threads(1)


def run(tmp_path, model, lines, *args) -> list[dict]:
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main([str(model), "--input", str(inp), "--output", str(out), *args]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_tokens_format_equals_the_predictor(tmp_path, tiny_pos_run):
    sentences = [["the", "big", "cat", "sees", "a", "dog", "."], ["Rome"], ["a", "tree", "likes", "this", "car"]]
    out = run(tmp_path, tiny_pos_run, [" ".join(s) for s in sentences])
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    expected = Predictor(loaded.tagger, loaded.vocab).predict(sentences)
    assert [o["tokens"] for o in out] == sentences
    for o, exp in zip(out, expected):
        assert o["tags"] == [p.tag for p in exp]
        assert o["scores"] == pytest.approx([p.score for p in exp], abs=1e-6)
        assert set(o["tags"]) <= set(loaded.vocab.labels)


def test_one_output_line_per_input_line_even_empty(tmp_path, tiny_pos_run):
    out = run(tmp_path, tiny_pos_run, ["the cat", "", "a dog"])
    assert [o["tokens"] for o in out] == [["the", "cat"], [], ["a", "dog"]]
    assert out[1] == {"tokens": [], "tags": [], "scores": []}


def test_run_dir_checkpoint_and_best_json_are_the_same_model(tmp_path, tiny_pos_run):
    best = tmp_path / "best.json"
    best.write_text(json.dumps({"run_dir": str(tiny_pos_run), "checkpoint": str(tiny_pos_run / "checkpoints" / "best.ckpt"),
                                "task": "pos"}))
    lines = ["the old dog eats a tree ."]
    outs = [run(tmp_path, m, lines) for m in (tiny_pos_run, tiny_pos_run / "checkpoints" / "best.ckpt", best)]
    assert outs[0] == outs[1] == outs[2]


def test_raw_text_is_tokenized_with_offsets(tmp_path, tiny_pos_run):
    text = "Don't see the cat's 3.5 dogs, John."
    (o,) = run(tmp_path, tiny_pos_run, [text], "--tokenize")
    assert o["text"] == text
    assert o["tokens"] == [t for t, _, _ in tokenize(text)]
    assert [text[a:b] for a, b in o["offsets"]] == o["tokens"]
    assert len(o["tags"]) == len(o["tokens"]) == len(o["scores"])


def test_long_sentence_is_tagged_whole(tmp_path, tiny_pos_run):
    sentence = ("the big cat sees a dog . " * 430).split()[:3000]
    (o,) = run(tmp_path, tiny_pos_run, [" ".join(sentence)])
    assert len(o["tags"]) == len(o["scores"]) == 3000
    assert all(0 < s <= 1 for s in o["scores"])


def test_conll_format_reads_word_column_and_sentence_breaks(tmp_path, tiny_ner_run, tiny_data):
    conll = tiny_data / "conll2003" / "eng.testa"
    out_file = tmp_path / "out.jsonl"
    assert main([str(tiny_ner_run), "--input", str(conll), "--format", "conll", "--output", str(out_file)]) == 0
    out = [json.loads(line) for line in out_file.read_text().splitlines()]
    gold = read_conll_columns(conll)
    assert [o["tokens"] for o in out] == [s["tokens"] for s in gold]
    loaded = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    assert {t for o in out for t in o["tags"]} <= set(loaded.vocab.labels)


def test_jsonl_format_mixes_tokens_and_text(tmp_path, tiny_pos_run):
    lines = [json.dumps({"tokens": ["the", "cat"]}), "", json.dumps({"text": "A dog."})]
    out = run(tmp_path, tiny_pos_run, lines, "--format", "jsonl")
    assert [o["tokens"] for o in out] == [["the", "cat"], ["A", "dog", "."]]
    assert out[1]["offsets"] == [[0, 1], [2, 5], [5, 6]]


@pytest.mark.parametrize("line", ['{"tokens": "the cat"}', '{"words": []}', "not json", '["a"]', '{"tokens": [1]}',
                                  '{"tokens": ["a", ""]}'])
def test_bad_jsonl_line_names_its_line(line):
    with pytest.raises(InputError, match=r"^in\.jsonl:2: "):
        list(read_sentences([json.dumps({"tokens": ["ok"]}), line], "jsonl", False, "in.jsonl"))


def test_bad_input_exits_nonzero(tmp_path, tiny_pos_run, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text("oops\n")
    assert main([str(tiny_pos_run), "--input", str(inp), "--format", "jsonl"]) == 1
    assert "in.jsonl:1" in capsys.readouterr().err


def test_empty_conllu_form_names_its_line():
    line = "1\t\t_\tNOUN\t_\t_\t0\troot\t_\t_"
    with pytest.raises(InputError, match=r"^in\.conllu:1: empty FORM"):
        list(read_sentences([line], "conllu", False, "in.conllu"))


def test_input_not_in_utf8_names_its_line_and_reads_with_encoding(tmp_path, tiny_pos_run, capsys):
    inp, out = tmp_path / "latin1.txt", tmp_path / "out.jsonl"
    inp.write_bytes("the cat\nthe café\n".encode("latin-1"))
    argv = [str(tiny_pos_run), "--input", str(inp), "--output", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{inp}:2: bytes b'\\xe9' are not valid utf-8" in err and "--encoding" in err
    assert not out.exists()  # the output is written whole or not at all
    assert main([*argv, "--encoding", "latin-1"]) == 0
    assert [json.loads(line)["tokens"] for line in out.read_text(encoding="utf-8").splitlines()][1] == ["the", "café"]


def test_stdin_is_read_in_the_given_encoding(monkeypatch):
    import io

    from tagger.commands.predict import input_lines

    def stdin():
        return io.TextIOWrapper(io.BytesIO("the café\n".encode("latin-1")), encoding="utf-8")

    monkeypatch.setattr("sys.stdin", stdin())
    assert list(input_lines("-", "latin-1")) == ["the café\n"]
    monkeypatch.setattr("sys.stdin", stdin())
    with pytest.raises(InputError, match=r"^<stdin>: bytes b'\\xe9' are not valid utf-8"):
        list(input_lines("-", "utf-8"))


def test_missing_input_file_is_a_clear_error(tmp_path, tiny_pos_run, capsys):
    assert main([str(tiny_pos_run), "--input", str(tmp_path / "nope.txt")]) == 1
    assert "nope.txt: No such file" in capsys.readouterr().err


def test_missing_model_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 1
    assert "not found" in capsys.readouterr().err


def test_chunks_cut_between_documents_and_at_size_without_them():
    from tagger.commands.predict import _chunks

    plain = [{"tokens": ["a"]} for _ in range(10)]
    assert [len(c) for c in _chunks(plain, 4)] == [4, 4, 2]  # no documents: cut at the size
    docs = [{"tokens": ["a"], "doc": d} for d in "aaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]  # 5 x a, 35 x b
    sizes = [len(c) for c in _chunks(docs, 4)]
    assert sizes[0] == 5  # document a kept whole past the size
    assert max(sizes) <= 32 and sum(sizes) == 40  # a long document is still cut at 8 x size


def test_conll_input_keeps_documents(tmp_path):
    lines = ["-DOCSTART- -X- O O", "", "EU x", "rejects x", "", "-DOCSTART- -X- O O", "Peter x", ""]
    records = list(read_sentences(lines, "conll", False, "in.txt"))
    assert [r["tokens"] for r in records] == [["EU", "rejects"], ["Peter"]]
    assert records[0]["doc"] != records[1]["doc"]
