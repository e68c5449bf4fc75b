"""Tests for tagger.data.readers on tiny fixture files."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from tagger.data.readers import (
    ColumnCorpus,
    ConlluCorpus,
    CorpusFormatError,
    build_dataset_dict,
    read_conll_columns,
    read_conllu,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def conllu_line(i: str, form: str, upos: str = "NOUN", xpos: str = "NN") -> str:
    return "\t".join([i, form, form.lower(), upos, xpos, "_", "0", "root", "_", "_"])


# --------------------------------------------------------------------------- #
# read_conllu
# --------------------------------------------------------------------------- #

CONLLU = "\n".join(
    [
        "# newdoc id = doc1",  # 1
        "# sent_id = s1",  # 2
        "# text = I can't go.",  # 3
        conllu_line("1", "I", "PRON", "PRP"),  # 4
        "\t".join(["2-3", "can't", "_", "_", "_", "_", "_", "_", "_", "_"]),  # 5
        conllu_line("2", "ca", "AUX", "MD"),  # 6
        conllu_line("3", "n't", "PART", "RB"),  # 7
        conllu_line("4", "go", "VERB", "VB"),  # 8
        "\t".join(["4.1", "went", "go", "VERB", "VBD", "_", "_", "_", "0:root", "_"]),  # 9
        conllu_line("5", ".", "PUNCT", "."),  # 10
        "",  # 11
        "# newdoc",  # 12: a document without an id
        conllu_line("1", "Hello world", "INTJ", "UH"),  # 13: no sent_id, FORM with a space
        conllu_line("2", "!", "PUNCT", "."),  # 14 -- no trailing blank line
    ]
)


def test_read_conllu_upos(tmp_path: Path) -> None:
    sents = read_conllu(write(tmp_path / "a.conllu", CONLLU))
    assert sents == [
        {"id": "s1", "doc": "doc1", "tokens": ["I", "ca", "n't", "go", "."],
         "tags": ["PRON", "AUX", "PART", "VERB", "PUNCT"]},
        {"id": "a.conllu:13", "doc": "a.conllu:12", "tokens": ["Hello world", "!"], "tags": ["INTJ", "PUNCT"]},
    ]


def test_read_conllu_without_newdoc_is_one_document(tmp_path: Path) -> None:
    text = "\n".join([conllu_line("1", "A"), "", conllu_line("1", "B"), ""])
    assert [s["doc"] for s in read_conllu(write(tmp_path / "b.conllu", text))] == ["b.conllu", "b.conllu"]


def test_read_conllu_xpos_and_trailing_blank_lines(tmp_path: Path) -> None:
    sents = read_conllu(write(tmp_path / "a.conllu", CONLLU + "\n\n\n"), tag_column="xpos")
    assert [s["tags"] for s in sents] == [["PRP", "MD", "RB", "VB", "."], ["UH", "."]]


def test_read_conllu_bad_tag_column(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="deprel"):
        read_conllu(write(tmp_path / "a.conllu", CONLLU), tag_column="deprel")


@pytest.mark.parametrize(
    ("bad_line", "what"),
    [
        ("1 I PRON PRP _ _ 0 root _ _", "10 tab-separated columns"),  # spaces, not tabs
        ("\t".join(["1", "I", "I", "PRON", "PRP", "_", "0", "root", "_"]), "found 9"),
        (conllu_line("x", "I"), "not an integer"),
        (conllu_line("1-a", "I"), "not an integer"),
        (conllu_line("1", ""), "empty FORM"),
        (conllu_line("1", "I", upos=""), "empty UPOS"),
    ],
)
def test_read_conllu_malformed_line(tmp_path: Path, bad_line: str, what: str) -> None:
    text = "\n".join(["# sent_id = s1", conllu_line("1", "Ok"), "", "# sent_id = s2", bad_line, ""])
    path = write(tmp_path / "bad.conllu", text)
    with pytest.raises(CorpusFormatError, match=what) as info:
        read_conllu(path)
    assert f"{path}:5:" in str(info.value)
    assert info.value.lineno == 5


def latin1_file(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("latin-1"))
    return path


# 2,000 ASCII sentences first: the text layer decodes the file in blocks, so the line must be found, not guessed
LATIN1_CONLLU = "".join(f"{conllu_line('1', 'ok')}\n\n" for _ in range(2000)) + conllu_line("1", "café") + "\n"


def test_read_conllu_not_utf8_names_file_line_encoding_and_bytes(tmp_path: Path) -> None:
    path = latin1_file(tmp_path / "latin1.conllu", LATIN1_CONLLU)
    with pytest.raises(CorpusFormatError) as info:
        read_conllu(path)
    message = str(info.value)
    assert message.startswith(f"{path}:4001: ") and info.value.lineno == 4001
    assert "utf-8" in message and r"b'\xe9'" in message and "data.corpus.encoding" in message
    sents = read_conllu(path, encoding="latin-1")
    assert len(sents) == 2001 and sents[-1]["tokens"] == ["café"]


def test_utf8_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.conllu"
    path.write_bytes("\ufeff# sent_id = s1\n".encode() + conllu_line("1", "ok").encode() + b"\n")
    assert read_conllu(path) == [{"id": "s1", "doc": "bom.conllu", "tokens": ["ok"], "tags": ["NOUN"]}]


# --------------------------------------------------------------------------- #
# read_conll_columns
# --------------------------------------------------------------------------- #

CONLL03 = """\
-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O
Paris NNP I-NP I-LOC
Rome NNP I-NP B-LOC
"""


def test_read_columns_conll2003(tmp_path: Path) -> None:
    sents = read_conll_columns(write(tmp_path / "eng.train", CONLL03))
    assert sents == [
        {"id": "eng.train:3", "doc": "eng.train:1", "tokens": ["EU", "rejects", "German", "call"],
         "tags": ["B-ORG", "O", "B-MISC", "O"]},
        # -DOCSTART- ends a sentence even without a blank line, and starts the next document
        {"id": "eng.train:8", "doc": "eng.train:1", "tokens": ["Peter", "Blackburn"], "tags": ["B-PER", "I-PER"]},
        {"id": "eng.train:11", "doc": "eng.train:10", "tokens": ["Paris", "Rome"], "tags": ["B-LOC", "B-LOC"]},
    ]


def test_read_columns_bioes_target_and_pos_column(tmp_path: Path) -> None:
    path = write(tmp_path / "eng.train", CONLL03)
    bioes = read_conll_columns(path, target_scheme="BIOES")
    assert bioes[1]["tags"] == ["B-PER", "E-PER"]
    assert bioes[2]["tags"] == ["S-LOC", "S-LOC"]
    pos = read_conll_columns(path, tag_column=1, scheme=None)
    assert pos[0]["tags"] == ["NNP", "VBZ", "JJ", "NN"]
    chunks = read_conll_columns(path, tag_column=2, scheme="none")
    assert chunks[0]["tags"] == ["I-NP", "I-VP", "I-NP", "I-NP"]


def test_read_columns_tab_separator(tmp_path: Path) -> None:
    # with an explicit tab separator, spaces belong to the token
    text = "1\tNew York\tB-LOC\n2\tis\tO\n\n1\tbig\tO\n"
    path = write(tmp_path / "t.tsv", text)
    sents = read_conll_columns(path, word_column=1, tag_column=2, separator="\t", scheme="IOB2", target_scheme="IOB2")
    assert [s["tokens"] for s in sents] == [["New York", "is"], ["big"]]
    assert [s["tags"] for s in sents] == [["B-LOC", "O"], ["O"]]
    # whitespace splitting of the same file would see the space as a column break: the field counts differ,
    # and that is an error naming both lines instead of the word "New" read silently
    with pytest.raises(CorpusFormatError, match=r"t.tsv:2: 3 field\(s\) split on any whitespace, where line 1 has 4"):
        read_conll_columns(path, word_column=1, tag_column=-1, scheme="IOB2")


@pytest.mark.parametrize("line", [" \tO", "\tO", "ke s\tO"])
def test_read_columns_btc_style_words_need_the_tab_separator(tmp_path: Path, line: str) -> None:
    """Broad Twitter Corpus lines: a word that is a space, empty, or holds a space."""
    path = write(tmp_path / "t.conll", f"I\tO\n{line}\nParis\tB-LOC\n")
    with pytest.raises(CorpusFormatError, match=r"t.conll:2: "):
        read_conll_columns(path, scheme="IOB2")  # whitespace: the word is lost, the tag read as the word
    if line.startswith("\t"):
        with pytest.raises(CorpusFormatError, match=r"t.conll:2: empty word column \(data.corpus.empty_words=keep"):
            read_conll_columns(path, separator="\t", scheme="IOB2")
    kept = read_conll_columns(path, separator="\t", scheme="IOB2", empty_words="keep")
    assert kept[0]["tokens"] == ["I", line.split("\t")[0], "Paris"] and kept[0]["tags"] == ["O", "O", "B-LOC"]


def test_read_columns_too_few_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "eng.testa", "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nGerman\n")
    with pytest.raises(CorpusFormatError, match="only 1 column") as info:
        read_conll_columns(path, tag_column=3)
    assert f"{path}:4:" in str(info.value)
    with pytest.raises(CorpusFormatError, match=r"word column 5"):
        read_conll_columns(path, word_column=5)


def test_read_columns_invalid_tag_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "eng.testb", "EU NNP I-NP I-ORG\n\nrejects VBZ I-VP S-ORG\n")
    with pytest.raises(CorpusFormatError, match="'S-ORG'") as info:
        read_conll_columns(path)
    assert str(info.value).startswith(f"{path}:3:")


# --------------------------------------------------------------------------- #
# build_dataset_dict
# --------------------------------------------------------------------------- #


def sent(sid: str, tags: list[str]) -> dict:
    return {"id": sid, "tokens": [f"w{i}" for i in range(len(tags))], "tags": tags}


def test_build_dataset_dict_labels_from_train_only() -> None:
    splits = {
        "train": [sent("t1", ["B-PER", "O", "I-PER"]), sent("t2", ["B-LOC", "O"])],
        "validation": [sent("v1", ["O", "B-LOC"])],
        "test": [sent("x1", ["B-PER"])],
    }
    dd = build_dataset_dict(splits)
    assert isinstance(dd, datasets.DatasetDict)
    assert set(dd) == {"train", "validation", "test"}
    label = dd["train"].features["tags"].feature
    assert isinstance(label, datasets.ClassLabel)
    assert label.names == ["O", "B-LOC", "B-PER", "I-PER"]
    row = dd["train"][0]
    assert row["id"] == "t1" and row["tokens"] == ["w0", "w1", "w2"]
    assert dd["train"]["doc"] == ["t1", "t2"]  # sentences given without a document stand alone
    assert all(isinstance(t, int) for t in row["tags"])
    assert label.int2str(row["tags"]) == ["B-PER", "O", "I-PER"]
    assert label.int2str(dd["validation"][0]["tags"]) == ["O", "B-LOC"]
    assert dd["validation"].features == dd["train"].features


def test_build_dataset_dict_without_o() -> None:
    dd = build_dataset_dict({"train": [sent("t", ["VERB", "ADJ", "NOUN"])]})
    assert dd["train"].features["tags"].feature.names == ["ADJ", "NOUN", "VERB"]


def test_build_dataset_dict_unknown_tag_raises() -> None:
    splits = {"train": [sent("t1", ["O", "B-PER"])], "validation": [sent("v7", ["O", "B-MISC"])]}
    with pytest.raises(ValueError, match=r"'validation'.*'B-MISC'.*v7"):
        build_dataset_dict(splits)


# --------------------------------------------------------------------------- #
# Corpus config objects
# --------------------------------------------------------------------------- #

SPLITS = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}


def test_column_corpus_load(tmp_path: Path) -> None:
    for name in SPLITS.values():
        write(tmp_path / name, CONLL03)
    corpus = ColumnCorpus(data_dir=str(tmp_path), files=SPLITS, target_scheme="BIOES")
    assert corpus.tag_scheme == "BIOES"
    dd = corpus.load()
    assert set(dd) == {"train", "validation", "test"}
    assert [dd[s].num_rows for s in SPLITS] == [3, 3, 3]
    assert dd["train"]["doc"] == ["train.txt:1", "train.txt:1", "train.txt:10"]
    names = dd["train"].features["tags"].feature.names
    assert names[0] == "O" and "E-PER" in names and "S-LOC" in names
    assert ColumnCorpus(str(tmp_path), SPLITS, tag_column=1, scheme=None).tag_scheme is None


def test_conllu_corpus_load(tmp_path: Path) -> None:
    for name in SPLITS.values():
        write(tmp_path / name, CONLLU)
    corpus = ConlluCorpus(data_dir=str(tmp_path), files=SPLITS, tag_column="xpos")
    assert corpus.tag_scheme is None
    dd = corpus.load()
    assert set(dd) == {"train", "validation", "test"}
    assert dd["test"][1]["tokens"] == ["Hello world", "!"]
    assert dd["test"].features["tags"].feature.int2str(dd["test"][0]["tags"]) == ["PRP", "MD", "RB", "VB", "."]


def test_corpus_absolute_file_path(tmp_path: Path) -> None:
    path = write(tmp_path / "train.conllu", CONLLU)
    dd = ConlluCorpus(data_dir="/nonexistent", files={"train": str(path)}).load()
    assert dd["train"].num_rows == 2


@pytest.mark.parametrize("cls", [ColumnCorpus, ConlluCorpus])
def test_corpus_missing_file(tmp_path: Path, cls: type) -> None:
    write(tmp_path / "train.txt", CONLL03)
    corpus = cls(data_dir=str(tmp_path), files=SPLITS)
    with pytest.raises(FileNotFoundError) as info:
        corpus.load()
    message = str(info.value)
    assert str(tmp_path / "dev.txt") in message
    assert "data_dir=" in message and "TAGGER_DATA_DIR" in message


@pytest.mark.parametrize("cls", [ColumnCorpus, ConlluCorpus])
def test_corpus_encoding_option(tmp_path: Path, cls: type) -> None:
    text = CONLL03.replace("Paris", "Besançon") if cls is ColumnCorpus else CONLLU.replace("Hello world", "Été")
    for name in SPLITS.values():
        latin1_file(tmp_path / name, text)
    with pytest.raises(CorpusFormatError, match=r"train\.txt:\d+: bytes .* are not valid utf-8"):
        cls(str(tmp_path), SPLITS).load()
    dd = cls(str(tmp_path), SPLITS, encoding="latin-1").load()
    assert {"Besançon", "Été"} & {t for sent in dd["train"]["tokens"] for t in sent}


def test_corpus_rejects_bad_config(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="allowed schemes"):
        ColumnCorpus(str(tmp_path), SPLITS, scheme="IOBES")
    with pytest.raises(ValueError, match="tag_column"):
        ConlluCorpus(str(tmp_path), SPLITS, tag_column="lemma")
    with pytest.raises(ValueError, match="data.corpus.encoding: unknown encoding 'latin-9000'"):
        ColumnCorpus(str(tmp_path), SPLITS, encoding="latin-9000")
