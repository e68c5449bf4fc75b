"""Raw text -> sentences of tokens, each with character offsets into the text (``text[start:end] == token``).

A model sees tokens cut the way its training corpus cut them, so the convention is a property of the
corpus (``data.tokenizer`` in ``conf/data/*.yaml``), saved in the model's vocabulary and used by
``tagger.load``, ``tagger predict --tokenize`` and the service alike:

* ``ud`` — Universal Dependencies English (EWT): hyphenated words split (``state - of - the - art``),
  clitics and negation split (``do n't``, ``cat 's``, ``can not``);
* ``conll`` — CoNLL-2003 (Reuters, Penn Treebank style): clitics split the same way, hyphenated words
  kept whole (``state-of-the-art``, ``EU-wide``);
* ``whitespace`` — tokens are the text's whitespace-separated pieces, nothing else is split.

The ``ud`` and ``conll`` rules are spaCy's rule-based English tokenizer (``spacy.blank("en")``: no
model, no download), rather than NLTK's Treebank tokenizer (which rewrites quotes, so its tokens
are not slices of the text, and whose sentence splitter needs a data download) or syntok/pysbd (less
maintained, no UD hyphen convention): spaCy's English rules already split hyphens between letters as UD
does, keep URLs, e-mail addresses, numbers and abbreviations (``U.S.``, ``e.g.``) whole, and every token
is a slice of the input. The CoNLL convention is the same tokenizer with the letter-hyphen-letter infix
rule removed (spaCy's documented way of changing a rule set).

Sentences are split by spaCy's rule-based ``Sentencizer`` (after ``.``, ``!``, ``?`` and their closing
quotes/brackets; abbreviations such as ``Mr.`` are one token, so they do not end a sentence) and at
blank lines.

spaCy's prefix/suffix search is quadratic in the length of one whitespace-free run of characters, so a
run longer than :data:`LONG_RUN` characters (no word is; pasted binary or a 1 MB line of brackets is)
is cut by a linear regex instead.
"""
from __future__ import annotations

import bisect
import re
from functools import lru_cache
from typing import Any

Token = tuple[str, int, int]  # (text, start, end) with text == source[start:end]

CONVENTIONS = ("ud", "conll", "whitespace")
LONG_RUN = 100  # characters; longer whitespace-free runs skip spaCy's rules (see the module docstring)

_LONG = re.compile(rf"\S{{{LONG_RUN + 1},}}")
_FALLBACK = re.compile(r"(?:https?://|www\.)[^\s<>\"]{0,2000}[^\s<>\".,;:!?)\]}'\u2019\u201d]|\w+|[^\w\s]")
_WHITESPACE = re.compile(r"\S+")
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n")


def default_convention(task: str) -> str:
    """The convention of a model saved without one: its task's training corpus (POS: UD EWT, NER: CoNLL-2003)."""
    return "ud" if task == "pos" else "conll"


def check_convention(name: Any, key: str = "data.tokenizer") -> str:
    if name not in CONVENTIONS:
        raise ValueError(f"{key} must be one of {', '.join(CONVENTIONS)}; got {name!r}")
    return name


@lru_cache(maxsize=None)
def _spacy(convention: str):
    """A blank English pipeline with the convention's tokenizer rules (built once per process)."""
    import spacy
    from spacy.lang.char_classes import HYPHENS
    from spacy.util import compile_infix_regex

    nlp = spacy.blank("en")
    if convention == "conll":
        # the only infix rule that names the hyphen class is the one splitting "state-of-the-art"
        infixes = [p for p in nlp.Defaults.infixes if HYPHENS not in p]
        nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
    return nlp


@lru_cache(maxsize=None)
def _sentencizer():
    from spacy.pipeline import Sentencizer

    return Sentencizer()


def _spacy_tokens(text: str, start: int, convention: str) -> list[Token]:
    doc = _spacy(convention).tokenizer(text)
    return [(t.text, start + t.idx, start + t.idx + len(t.text)) for t in doc if not t.is_space]


def tokenize(text: str, convention: str = "ud") -> list[Token]:
    """Split ``text`` into ``(token, start, end)`` triples; whitespace is dropped, nothing else is."""
    check_convention(convention, "tokenizer convention")
    if convention == "whitespace":
        return [(m.group(), m.start(), m.end()) for m in _WHITESPACE.finditer(text)]
    tokens: list[Token] = []
    done = 0
    for m in _LONG.finditer(text):
        tokens += _spacy_tokens(text[done : m.start()], done, convention)
        tokens += [(f.group(), m.start() + f.start(), m.start() + f.end()) for f in _FALLBACK.finditer(m.group())]
        done = m.end()
    return tokens + _spacy_tokens(text[done:], done, convention)


def sentences(text: str, convention: str = "ud") -> list[list[Token]]:
    """``text`` split into sentences of ``(token, start, end)``; a text without tokens has no sentences."""
    from spacy.tokens import Doc

    tokens = tokenize(text, convention)
    if not tokens:
        return []
    doc = _sentencizer()(Doc(_spacy("ud").vocab, words=[t for t, _, _ in tokens]))
    breaks = [m.end() for m in _PARAGRAPH.finditer(text)]  # ascending
    out: list[list[Token]] = []
    for i, token in enumerate(tokens):
        # a blank line between the previous token and this one
        paragraph = i > 0 and bisect.bisect_right(breaks, token[1]) > bisect.bisect_right(breaks, tokens[i - 1][2])
        if not out or doc[i].is_sent_start or paragraph:
            out.append([])
        out[-1].append(token)
    return out


def words(text: str, convention: str = "ud") -> list[str]:
    """Only the token strings of :func:`tokenize`."""
    return [t for t, _, _ in tokenize(text, convention)]
