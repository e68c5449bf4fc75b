"""A small regex tokenizer for raw text, close to Penn Treebank / UD English conventions.

Each token comes with its character offsets, ``text[start:end] == token``, so a service can point
back into what the user sent. Rules, in the order they are tried at each position:

* URLs (``https://…``, ``www.…``) and e-mail addresses stay whole (trailing punctuation is not
  part of them);
* numbers with inner separators stay whole: ``3.5``, ``1,000``, ``10:30``, ``1/2``;
* letter-dot abbreviations stay whole: ``U.S.``, ``e.g.``;
* negation and clitics split off as in PTB: ``don't`` -> ``do n't``, ``cat's`` -> ``cat 's``;
* words (letters, digits, underscores, inner hyphens: ``state-of-the-art``, ``COVID-19``);
* ``...`` and ``--`` stay whole; any other non-space character is a token of its own.

The text is one sequence: no sentence splitting (the predictor windows long inputs).
"""
from __future__ import annotations

import re

Token = tuple[str, int, int]  # (text, start, end) with text == source[start:end]

_APOS = "'\u2019"  # straight and typographic apostrophe
_TRAILING = r""".,;:!?)\]}'"\u2019\u201d>"""

_PATTERNS = [
    # bounded repetitions keep every alternative linear in the input (no catastrophic backtracking)
    ("url", rf"(?:https?://|www\.)[^\s<>\"]{{0,2000}}[^\s<>\"{_TRAILING}]"),
    ("email", r"[\w.+-]{1,64}@\w[\w-]{0,62}(?:\.[\w-]{1,63}){1,8}"),
    ("number", r"\d+(?:[.,:/]\d+)+"),
    ("abbrev", r"(?:[^\W\d_]\.){2,10}"),
    ("stem", rf"\w+?(?=[nN][{_APOS}][tT]\b)"),  # "do" of "don't", "ca" of "can't"
    ("neg", rf"[nN][{_APOS}][tT]\b"),
    ("clitic", rf"(?<=\w)[{_APOS}](?:[sSmMdD]|re|RE|ve|VE|ll|LL)\b"),
    ("word", r"\w+(?:-\w+)*"),
    ("punct", r"\.{2,}|-{2,}|[^\w\s]"),
]
_TOKEN = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _PATTERNS))


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into ``(token, start, end)`` triples; whitespace is dropped, nothing else is."""
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def words(text: str) -> list[str]:
    """Only the token strings of :func:`tokenize`."""
    return [t for t, _, _ in tokenize(text)]
