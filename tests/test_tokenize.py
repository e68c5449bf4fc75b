"""The raw-text tokenizer: PTB-like splits, offsets that slice the text back, linear time."""
from __future__ import annotations

import time

import pytest

from tagger.tokenize import tokenize, words


@pytest.mark.parametrize("text, expected", [
    ("The cat sat.", ["The", "cat", "sat", "."]),
    ("Don't go, it isn't safe.", ["Do", "n't", "go", ",", "it", "is", "n't", "safe", "."]),
    ("I can't; they won't.", ["I", "ca", "n't", ";", "they", "wo", "n't", "."]),
    ("the cat's toy, we're here, I'll see, she'd go, I'm ok, they've left",
     ["the", "cat", "'s", "toy", ",", "we", "'re", "here", ",", "I", "'ll", "see", ",", "she", "'d", "go", ",",
      "I", "'m", "ok", ",", "they", "'ve", "left"]),
    ("DON'T SHOUT", ["DO", "N'T", "SHOUT"]),
    ("It costs $3.50, or 1,000 units at 10:30 (1/2 off).",
     ["It", "costs", "$", "3.50", ",", "or", "1,000", "units", "at", "10:30", "(", "1/2", "off", ")", "."]),
    ("Visit https://example.com/a?b=1&c=2. Or www.example.org!",
     ["Visit", "https://example.com/a?b=1&c=2", ".", "Or", "www.example.org", "!"]),
    ("Mail john.smith+tag@mail.example.co.uk, please.",
     ["Mail", "john.smith+tag@mail.example.co.uk", ",", "please", "."]),
    ("The U.S. and e.g. state-of-the-art COVID-19 tests...", ["The", "U.S.", "and", "e.g.", "state-of-the-art",
                                                             "COVID-19", "tests", "..."]),
    ("wait -- what?!", ["wait", "--", "what", "?", "!"]),
    ("\u201cQuoted\u201d and typographic don\u2019t", ["\u201c", "Quoted", "\u201d", "and", "typographic", "do",
                                                       "n\u2019t"]),
    ("Ünïcödé naïve café 東京 2nd", ["Ünïcödé", "naïve", "café", "東京", "2nd"]),
    ("'quoted' words", ["'", "quoted", "'", "words"]),
    ("", []),
    ("   \n\t ", []),
])
def test_tokens(text, expected):
    assert words(text) == expected


@pytest.mark.parametrize("text", [
    "Don't worry, the cat's toy costs $3.50 -- see https://x.org/a.",
    "  leading and trailing spaces  ", "tabs\tand\nnewlines\r\nmixed", "emoji 🙂 and 東京 text",
])
def test_offsets_slice_the_text_back(text):
    tokens = tokenize(text)
    assert tokens, text
    for token, start, end in tokens:
        assert text[start:end] == token
    # in order, non-overlapping, and only whitespace is dropped
    assert all(a[2] <= b[1] for a, b in zip(tokens, tokens[1:]))
    covered = set().union(*(range(s, e) for _, s, e in tokens))
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)


@pytest.mark.parametrize("text", ["a." * 200_000, "x@" * 200_000, "a" * 400_000, "don" * 100_000 + "'t",
                                  "http://" + "." * 400_000, "1." * 200_000])
def test_adversarial_input_is_linear(text):
    """A request body may hold 1 MB of anything: no pattern may backtrack quadratically."""
    started = time.perf_counter()
    tokens = tokenize(text)
    assert time.perf_counter() - started < 5
    assert "".join(t for t, _, _ in tokens) == "".join(text.split())
