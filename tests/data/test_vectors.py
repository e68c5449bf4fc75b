"""Pretrained word vectors: reading sources, the vocabulary they extend, the table the model keeps, and words
that only the vectors know reaching predictions."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tagger.data.vectors import PACKAGES, VectorsError, load_vectors, read_text
from tagger.data.vocab import Vocab
from tests.conftest import train_tiny

DIM = 8
# "zebra" and "giraffe" never occur in the tiny corpora: only the vectors know them
VECTOR_WORDS = ["the", "cat", "dog", "paris", "zebra", "giraffe", "???", "${x}"]


def write_vectors(path: Path, words=VECTOR_WORDS, dim=DIM, header=False, seed=0) -> Path:
    rng = np.random.default_rng(seed)
    lines = [f"{len(words)} {dim}"] if header else []
    lines += [w + " " + " ".join(f"{v:.5f}" for v in rng.normal(size=dim)) for w in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_glove_text_and_word2vec_header_read_alike(tmp_path):
    a = read_text(write_vectors(tmp_path / "a.txt"))
    b = read_text(write_vectors(tmp_path / "b.vec", header=True))
    assert a.words == b.words == VECTOR_WORDS and a.dim == b.dim == DIM
    np.testing.assert_array_equal(a.table, b.table)
    assert a.find("Zebra") == a.find("zebra") == 4 and a.find("okapi") is None
    assert read_text(tmp_path / "a.txt", max_words=3).words == VECTOR_WORDS[:3]


def test_a_word_with_spaces_keeps_them(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("new york 0.5 1.5\nthe 1 2\n", encoding="utf-8")
    v = read_text(path)
    assert v.words == ["new york", "the"] and v.table[0].tolist() == [0.5, 1.5]


@pytest.mark.parametrize("body, message", [
    ("the 1 2 3\ncat 1 2\n", r"v.txt:2: expected a word and 3 numbers, got 2"),
    ("the 1 2\ncat 1 x\n", r"v.txt:2: 'cat 1' has a value that is not a number|v.txt:2: 'cat' has a value"),
    ("the 1 2\ncat 1 nan\n", r"v.txt:2: 'cat' has a non-finite value"),
    ("\n\n", r"v.txt: no vectors"),
])
def test_malformed_vectors_file_names_file_and_line(tmp_path, body, message):
    path = tmp_path / "v.txt"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(VectorsError, match=message):
        read_text(path)


def test_unknown_source_is_named(tmp_path):
    with pytest.raises(VectorsError, match="embedder.vectors: 'nope' is neither"):
        load_vectors("nope")


def test_vocab_keeps_training_words_first_then_vector_words(tmp_path):
    vectors = read_text(write_vectors(tmp_path / "v.txt", words=["the", "Cat", "1999", "2001", "zebra"]))
    vocab = Vocab.build([["the", "cat", "the"]], ["X"], "pos", vectors=vectors)
    assert vocab.words[:4] == ["<pad>", "<unk>", "the", "cat"] and vocab.num_trained == 4
    # "Cat" is a vector word of its own (exact forms are kept); both years normalise to "0000": the first wins
    assert vocab.words[4:] == ["Cat", "0000", "zebra"]
    assert vocab.word_id("zebra") == 6 and vocab.is_unseen("zebra") and not vocab.is_unseen("cat")
    assert vocab.word_id("ZEBRA") == 6  # exact first, then lowercased
    assert vocab.word_id("okapi") == 1
    # unseen splits into words the vectors cover and words in neither (UNK)
    assert vocab.is_unknown("okapi") and vocab.is_unseen("okapi")
    assert not vocab.is_unknown("zebra") and not vocab.is_unknown("cat")
    again = Vocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert again == vocab and again.word_id("Zebra") == 6 and again.num_trained == 4


def test_embedder_dimension_mismatch_names_the_config_key(tmp_path, tiny_data):
    vec = write_vectors(tmp_path / "v.txt")
    with pytest.raises(Exception, match="embedder.word_dim"):
        train_tiny(tmp_path / "run", tiny_data, [f"embedder.vectors={vec}", "embedder.word_dim=16",
                                                 "+trainer.fast_dev_run=true"])


@pytest.mark.parametrize("finetune", ["train_words", "all", "none", "concat"])
def test_a_word_only_the_vectors_know_reaches_the_model_through_its_vector(tmp_path, tiny_data, finetune):
    from tagger.artifacts.checkpoint import load_checkpoint
    from tagger.commands.predict import main
    from tagger.inference.predictor import Predictor

    vec_path = write_vectors(tmp_path / "v.txt")
    vectors = read_text(vec_path)
    out = train_tiny(tmp_path / "run", tiny_data, [f"embedder.vectors={vec_path}", f"embedder.word_dim={DIM}",
                                                   f"embedder.finetune_vectors={finetune}", "model=bilstm",
                                                   "model.hidden_dim=16", "trainer.max_epochs=1"])
    loaded = load_checkpoint(out / "checkpoints" / "best.ckpt")
    vocab, emb = loaded.vocab, loaded.tagger.embedder
    zebra = vocab.word_id("Zebra")
    assert zebra >= vocab.num_trained and vocab.vectors == str(vec_path)
    ids = torch.tensor([[zebra, vocab.word_id("giraffe")]])
    want = torch.from_numpy(vectors.table[[4, 5]])[None]  # (1,2,DIM)
    # train_words, none, concat: vector words keep their rows as read (stored in float16); all: they trained only
    # through decay. concat: the vector is the second half, beside UNK's trained row
    tol = 0.05 if finetune == "all" else 2e-3
    got = emb.lookup(ids)
    if finetune == "concat":
        assert got.shape == (1, 2, 2 * DIM) and torch.equal(got[0, :, :DIM], emb.word.weight[[1, 1]])
        got = got[..., DIM:]
    assert torch.allclose(got, want, atol=tol)
    assert (emb.fixed_vectors is None) == (finetune == "all")
    trained = sum(p.numel() for p in loaded.tagger.embedder.word.parameters())
    assert trained == (len(vocab.words) if finetune == "all" else vocab.num_trained) * DIM
    # a training word that has a vector: trained away from it, except with none
    cat = vocab.word_id("cat")
    assert cat < vocab.num_trained
    cat_vector = torch.from_numpy(vectors.table[vectors.find("cat")])
    cat_rows = emb.lookup(torch.tensor([[cat]]))[0, 0].split(DIM)  # (DIM,) once, twice with concat
    assert torch.allclose(cat_rows[0], cat_vector, atol=2e-3) == (finetune == "none")
    if finetune == "concat":  # its trained half moved, its vector half did not
        assert torch.allclose(cat_rows[1], cat_vector, atol=2e-3)
    # prediction: the word changes the tags' scores the way its vector does (it is not UNK)
    pred = Predictor(loaded.tagger, loaded.vocab)
    with_vector = pred.predict([["the", "zebra", "sees", "a", "cat"]])[0]
    as_unknown = pred.predict([["the", "okapi", "sees", "a", "cat"]])[0]
    assert [p.score for p in with_vector] != [p.score for p in as_unknown]
    inp, res = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("the zebra sees a cat\n", encoding="utf-8")
    assert main([str(out), "--input", str(inp), "--output", str(res)]) == 0
    line = json.loads(res.read_text(encoding="utf-8"))
    assert line["tags"] == [p.tag for p in with_vector]


SYNTAX = ["???", "${oc.env:HOME}", "${x}", "{}", "null", "~"]


def write_syntax_corpus(root: Path) -> Path:
    """A CoNLL-U corpus whose words (and one tag) read as config syntax to OmegaConf."""
    (root / "ud_english_ewt").mkdir(parents=True)
    for split, n in (("train", 30), ("dev", 6), ("test", 6)):
        lines = []
        for i in range(n):
            words = ["the", SYNTAX[i % len(SYNTAX)], "cat", SYNTAX[(i + 1) % len(SYNTAX)]]
            tags = ["DET", "${x}", "NOUN", "???"]
            lines += [f"# sent_id = {split}-{i}"]
            lines += [f"{j}\t{w}\t{w}\t{t}\t_\t_\t0\tdep\t_\t_" for j, (w, t) in enumerate(zip(words, tags), 1)] + [""]
        (root / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("with_vectors", [False, True])
def test_corpus_tokens_that_look_like_config_syntax_stay_data(tmp_path, with_vectors):
    from tagger.artifacts.checkpoint import load_checkpoint
    from tagger.inference.predictor import Predictor

    data = write_syntax_corpus(tmp_path / "data")
    extra = [f"embedder.vectors={write_vectors(tmp_path / 'v.txt')}", f"embedder.word_dim={DIM}"] if with_vectors else []
    out = train_tiny(tmp_path / "run", data, ["model=window_fc", "model.hidden_dim=16", "trainer.max_epochs=1", *extra])
    loaded = load_checkpoint(out / "checkpoints" / "best.ckpt")
    assert all(loaded.vocab.word_id(w) > 1 for w in SYNTAX), "a corpus word was lost on the way to the vocabulary"
    assert {"${x}", "???"} <= set(loaded.vocab.labels)
    tags = Predictor(loaded.tagger, loaded.vocab).predict([SYNTAX])[0]
    assert len(tags) == len(SYNTAX) and {p.tag for p in tags} <= set(loaded.vocab.labels)
    assert json.loads((out / "vocab.json").read_text(encoding="utf-8"))["words"] == loaded.vocab.words


@pytest.mark.skipif(not all(__import__("importlib").util.find_spec(m) for m, _, _ in PACKAGES.values()),
                    reason="vectors package not installed (pip install '.[vectors]')")
def test_installed_glove_package_loads_by_name():
    v = load_vectors("glove-6b-50d", max_words=1000)
    assert len(v.words) == 1000 and v.dim == 50 and v.words[0] == "the"
    assert v.find("The") == 0 and np.isfinite(np.asarray(v.table)).all()
