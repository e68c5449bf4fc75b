"""The Python API: tagger.load on every kind of source, the three input shapes, offsets, spans, the tokenizer
convention saved with the model, a cheap ``import tagger``, and the example in docs/usage.md."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tagger
from tagger.api import LoadError
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.inference.predictor import Predictor

REPO = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def test_import_is_cheap():
    """``import tagger`` loads none of torch, Lightning, Hydra, spaCy: a CLI's --help and a user's import stay fast."""
    code = "import sys, tagger; print([m for m in ('torch', 'pytorch_lightning', 'hydra', 'spacy') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_entry_point_defaults_to_the_predictors_pass_size():
    """tagger.load, the API and the evaluation share the Predictor's default windows per pass (tagger.limits)."""
    import inspect

    from tagger.api import Pipeline, load
    from tagger.inference.predictor import Predictor
    from tagger.inference.scoring import evaluate_split, score_split

    want = inspect.signature(Predictor).parameters["batch_size"].default
    for entry in (tagger.load, load, Pipeline, evaluate_split, score_split):
        assert inspect.signature(entry).parameters["batch_size"].default == want, entry.__qualname__


def test_text_gives_sentences_with_offsets(tiny_pos_run):
    nlp = tagger.load(tiny_pos_run, threads=1)
    assert nlp.task == "pos" and nlp.tokenizer == "ud" and "NOUN" in nlp.labels
    text = "The state-of-the-art cat sees a dog. It doesn't  like   Rome!"
    first, second = nlp(text)
    assert first.tokens[:8] == ["The", "state", "-", "of", "-", "the", "-", "art"]  # UD splits hyphens
    assert second.tokens == ["It", "does", "n't", "like", "Rome", "!"]
    for sentence in (first, second):
        assert [text[a:b] for a, b in sentence.offsets] == sentence.tokens
        assert len(sentence.tags) == len(sentence.scores) == len(sentence.tokens)
        assert set(sentence.tags) <= set(nlp.labels) and sentence.spans is None
    # the same sentences given as tokens, each alone, get the tags the Predictor gives them
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    expected = Predictor(loaded.tagger, loaded.vocab).predict([first.tokens, second.tokens])
    by_tokens = nlp([first.tokens, second.tokens])
    assert [s.tags for s in by_tokens] == [[p.tag for p in e] for e in expected]
    assert by_tokens[0].offsets is None


def test_list_of_texts_gives_one_list_per_text(tiny_pos_run):
    nlp = tagger.load(tiny_pos_run)
    out = nlp(["A dog. A cat.", "", "the tree"])
    assert [len(x) for x in out] == [2, 0, 1]
    assert out[0][1].offsets == [(7, 8), (9, 12), (12, 13)]


def test_entity_tagger_returns_spans_and_keeps_hyphenated_words(tiny_ner_run):
    nlp = tagger.load(tiny_ner_run / "checkpoints" / "best.ckpt")
    assert nlp.tokenizer == "conll" and nlp.tag_scheme == "IOB2"
    text = "Mary Smith sees a state-of-the-art car in New York."
    (sentence,) = nlp(text)
    assert "state-of-the-art" in sentence.tokens
    assert sentence.spans is not None
    for span in sentence.spans:
        assert text[span.start:span.end] == span.text
        assert sentence.tags[span.token_start].endswith(span.label)
    assert json.loads(json.dumps(sentence.to_dict()))["tokens"] == sentence.tokens


def test_run_dir_best_json_checkpoint_and_store_tag_are_one_model(tmp_path, tiny_pos_run, store):
    from tagger.artifacts.package import package

    best = tmp_path / "best.json"
    best.write_text(json.dumps({"run_dir": str(tiny_pos_run), "task": "pos"}))
    tag = str(package(tiny_pos_run, "apitest").tag)
    text = "the big cat sees a dog ."
    outs = [tagger.load(src)(text) for src in (tiny_pos_run, best, tiny_pos_run / "checkpoints" / "best.ckpt", tag,
                                               "apitest:latest")]
    assert all(o == outs[0] for o in outs)


def test_attention_of_a_self_attention_model(tiny_pos_run):
    nlp = tagger.load(tiny_pos_run)
    assert nlp.supports_attention
    weights = nlp.attention("the cat sees a dog")
    assert len(weights[0][0]) == 5 and sum(weights[0][0][0]) == pytest.approx(1.0, abs=1e-4)  # [layer][head][q][k]


def test_bad_sources_and_inputs_are_clear_errors(tmp_path, tiny_pos_run, store):
    with pytest.raises(LoadError, match="not found"):
        tagger.load(tmp_path / "missing")
    with pytest.raises(LoadError, match="no such model in the BentoML store"):
        tagger.load("nosuchmodel:latest")
    with pytest.raises(TypeError, match="pre-tokenised"):
        tagger.load(tiny_pos_run)([1, 2])


ACCEPTED = re.escape("expected a string (one text), a list of strings (texts) or a list of token lists")


@pytest.mark.parametrize("inputs, given", [
    (None, "got None$"),
    (3, "got int 3$"),
    (b"The cat.", "got bytes: decode it to a str first"),
    ({"text": "The cat."}, "got dict"),
    ([1, 2], "item 0 is int 1$"),
    (["The cat.", 7], "item 0 is a string .* but item 1 is int 7$"),
    ([["The", "cat"], "a dog"], "item 0 is a token list .* but item 1 is str 'a dog'$"),
    ([["The", "cat"], ["a", None]], "sentence 1, token 1 is None, not a string$"),
])
def test_wrong_input_types_name_what_is_accepted_and_what_was_given(tiny_pos_run, inputs, given):
    with pytest.raises(TypeError, match=f"^{ACCEPTED}.*{given}"):
        tagger.load(tiny_pos_run)(inputs)


def test_an_empty_token_is_refused_naming_sentence_and_index(tiny_pos_run):
    nlp = tagger.load(tiny_pos_run)
    with pytest.raises(ValueError, match="^sentence 1, token 2 is an empty string"):
        nlp([["the", "cat"], ["a", "dog", "", "sees"]])
    with pytest.raises(ValueError, match="^sentence 0, token 0 "):
        nlp.tag_sentences([("", "cat")])
    assert [s.tokens for s in nlp([["the", "cat"], []])] == [["the", "cat"], []]  # an empty sentence is no error


@pytest.mark.parametrize("page", ["docs/usage.md", "README.md"])
def test_usage_example_runs(tiny_pos_run, page):
    """The first Python example of docs/usage.md and of the README, on the fixture run."""
    doc = (REPO / page).read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    assert len(code.strip().splitlines()) <= 5
    code = re.sub(r'tagger\.load\("[^"]*"\)', f'tagger.load("{tiny_pos_run}")', code)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2 and "'state'" in lines[0] and "(0, 3)" in lines[0]  # two sentences, with offsets
