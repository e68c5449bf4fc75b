"""The raw-text tokenizer: the UD and CoNLL-2003 conventions, offsets that slice the text back, sentence
splitting, bounded time on adversarial input, and the convention saved with the vocabulary."""
from __future__ import annotations

import time

import pytest

from tagger.data.vocab import PAD, UNK, Vocab
from tagger.tokenize import CONVENTIONS, sentences, tokenize, words


@pytest.mark.parametrize("text, expected", [
    ("The cat sat.", ["The", "cat", "sat", "."]),
    ("Don't go, it isn't safe.", ["Do", "n't", "go", ",", "it", "is", "n't", "safe", "."]),
    ("I can't; they won't.", ["I", "ca", "n't", ";", "they", "wo", "n't", "."]),
    ("the cat's toy, we're here, I'll see, I'm ok, they've left",
     ["the", "cat", "'s", "toy", ",", "we", "'re", "here", ",", "I", "'ll", "see", ",", "I", "'m", "ok", ",",
      "they", "'ve", "left"]),
    ("It costs $3.50, or 1,000 units at 10:30.", ["It", "costs", "$", "3.50", ",", "or", "1,000", "units", "at",
                                                 "10:30", "."]),
    ("Visit https://example.com/a?b=1&c=2 now", ["Visit", "https://example.com/a?b=1&c=2", "now"]),
    ("Mail john.smith+tag@mail.example.co.uk, please.", ["Mail", "john.smith+tag@mail.example.co.uk", ",", "please",
                                                        "."]),
    ("The U.S. and e.g. COVID-19 tests...", ["The", "U.S.", "and", "e.g.", "COVID-19", "tests", "..."]),
    ("wait -- what?!", ["wait", "--", "what", "?", "!"]),
    ("\u201cQuoted\u201d and typographic don\u2019t", ["\u201c", "Quoted", "\u201d", "and", "typographic", "do",
                                                       "n\u2019t"]),
    ("Ünïcödé naïve café 2nd", ["Ünïcödé", "naïve", "café", "2nd"]),
    ("", []),
    ("   \n\t ", []),
])
@pytest.mark.parametrize("convention", ["ud", "conll"])
def test_shared_rules(text, expected, convention):
    """Clitics, numbers, URLs, abbreviations: the same in both corpus conventions."""
    assert words(text, convention) == expected


@pytest.mark.parametrize("text, ud, conll", [
    ("state-of-the-art", ["state", "-", "of", "-", "the", "-", "art"], ["state-of-the-art"]),
    ("an EU-wide re-examine", ["an", "EU", "-", "wide", "re", "-", "examine"], ["an", "EU-wide", "re-examine"]),
])
def test_hyphens_split_in_ud_only(text, ud, conll):
    """UD English EWT tokenises hyphenated words into parts (HYPH tokens); CoNLL-2003 keeps them whole."""
    assert words(text, "ud") == ud
    assert words(text, "conll") == conll


def test_whitespace_convention_splits_nothing_else():
    assert words("It wasn't state-of-the-art.", "whitespace") == ["It", "wasn't", "state-of-the-art."]


def test_unknown_convention_is_named():
    with pytest.raises(ValueError, match="'penn'"):
        tokenize("x", "penn")


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("text", [
    "Don't worry, the cat's toy costs $3.50 -- see https://x.org/a.",
    "  leading and trailing spaces  ", "tabs\tand\nnewlines\r\nmixed", "emoji 🙂 and 東京 text",
    "a state-of-the-art run. " + "(" * 300 + " x",
])
def test_offsets_slice_the_text_back(text, convention):
    tokens = tokenize(text, convention)
    assert tokens, text
    for token, start, end in tokens:
        assert text[start:end] == token
    # in order, non-overlapping, and only whitespace is dropped
    assert all(a[2] <= b[1] for a, b in zip(tokens, tokens[1:]))
    covered = set().union(*(range(s, e) for _, s, e in tokens))
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)


def test_sentences():
    text = 'The state-of-the-art tagger ran. It was fast! Mr. Smith said "yes." Then he left\n\nA new paragraph'
    got = [[t for t, _, _ in s] for s in sentences(text, "ud")]
    assert [s[0] for s in got] == ["The", "It", "Mr.", "Then", "A"]
    assert got[2] == ["Mr.", "Smith", "said", '"', "yes", ".", '"']  # the closing quote stays with its sentence
    assert got[3] == ["Then", "he", "left"]  # a blank line ends a sentence without a full stop
    flat = [t for s in sentences(text, "ud") for t in s]
    assert flat == tokenize(text, "ud")  # splitting only groups the tokens
    assert sentences("  ", "ud") == []


@pytest.mark.parametrize("text", ["a." * 100_000, "x@" * 100_000, "a" * 200_000, "don" * 50_000 + "'t",
                                  "http://" + "." * 200_000, "(" * 200_000, "((((( " * 30_000])
def test_adversarial_input_takes_bounded_time(text):
    """A request body may hold anything: spaCy's quadratic prefix search never sees a long run."""
    started = time.perf_counter()
    tokens = tokenize(text)
    assert time.perf_counter() - started < 10
    assert "".join(t for t, _, _ in tokens) == "".join(text.split())


def test_vocab_keeps_the_convention():
    vocab = Vocab.build([["a", "b"]], ["X"], "ner", tokenizer="ud")
    assert Vocab.from_dict(vocab.to_dict()).tokenizer == "ud"
    # a vocabulary saved before the setting existed gets its task's corpus convention
    old = {k: v for k, v in vocab.to_dict().items() if k != "tokenizer"}
    assert Vocab.from_dict(old).tokenizer == "conll"
    assert Vocab.from_dict(old | {"task": "pos"}).tokenizer == "ud"
    with pytest.raises(ValueError, match="data.tokenizer"):
        Vocab([PAD, UNK], [PAD, UNK], ["X"], tokenizer="spaces")
