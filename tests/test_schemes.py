"""tagger.schemes on hand-made tag sequences: conversion (IOB1 edge cases included), CRF transition
constraints, strict entity spans, closing cut entities."""
from __future__ import annotations

import pytest

from tagger.schemes import (SCHEMES, allowed_transitions, close_entities, conlleval_entities, convert_scheme,
                            entity_spans, strict_entities)

IOB2_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


# -- convert_scheme: IOB1 / IOB2 / BIOES ---------------------------------------------------------


@pytest.mark.parametrize(
    ("iob1", "iob2"),
    [
        # I- at sentence start begins an entity
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),
        # B- separates two adjacent entities of the same type
        (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),
        # a type change without B- still starts a new entity
        (["I-PER", "I-LOC"], ["B-PER", "B-LOC"]),
        # entity after O
        (["O", "I-ORG", "I-ORG", "O", "I-MISC"], ["O", "B-ORG", "I-ORG", "O", "B-MISC"]),
        # single-token entities
        (["I-LOC"], ["B-LOC"]),
        (["I-LOC", "B-LOC", "B-LOC"], ["B-LOC", "B-LOC", "B-LOC"]),
        (["O", "O"], ["O", "O"]),
        ([], []),
    ],
)
def test_iob1_to_iob2(iob1: list[str], iob2: list[str]) -> None:
    assert convert_scheme(iob1, "IOB1", "IOB2") == iob2
    # and back: IOB1 only uses B- where it is needed
    assert convert_scheme(iob2, "IOB2", "IOB1") == iob1


def test_iob2_bioes_round_trip() -> None:
    iob2 = ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG"]
    bioes = ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "O", "B-ORG", "E-ORG"]
    assert convert_scheme(iob2, "IOB2", "BIOES") == bioes
    assert convert_scheme(bioes, "BIOES", "IOB2") == iob2
    iob1 = convert_scheme(bioes, "BIOES", "IOB1")
    assert iob1 == ["I-PER", "I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "O", "I-ORG", "I-ORG"]
    assert convert_scheme(iob1, "IOB1", "BIOES") == bioes


def test_ill_formed_iob2_is_read_like_conlleval() -> None:
    # I-X after O and I-Y after I-X both start a new entity
    assert convert_scheme(["O", "I-PER", "I-PER", "I-LOC"], "IOB2", "IOB2") == ["O", "B-PER", "I-PER", "B-LOC"]
    assert convert_scheme(["I-PER", "O", "I-PER"], "IOB2", "BIOES") == ["S-PER", "O", "S-PER"]


def test_lenient_bioes_decoding() -> None:
    # I-/E- after a closed entity start a new one instead of extending it
    assert convert_scheme(["S-PER", "I-PER", "E-PER"], "BIOES", "IOB2") == ["B-PER", "B-PER", "I-PER"]
    assert convert_scheme(["O", "E-LOC"], "BIOES", "IOB2") == ["O", "B-LOC"]


@pytest.mark.parametrize(
    ("tag", "scheme"),
    [("E-PER", "IOB1"), ("S-PER", "IOB2"), ("PER", "IOB2"), ("B-", "BIOES"), ("X-PER", "BIOES"), ("o", "IOB1")],
)
def test_bad_tag_raises_naming_it(tag: str, scheme: str) -> None:
    with pytest.raises(ValueError, match=repr(tag)):
        convert_scheme(["O", tag], scheme, "IOB2")


def test_unknown_scheme_names_allowed_ones() -> None:
    with pytest.raises(ValueError, match="IOB1, IOB2, BIOES"):
        convert_scheme(["O"], "IOBES", "IOB2")
    with pytest.raises(ValueError, match="allowed"):
        convert_scheme(["O"], "IOB2", "BILOU")
    assert SCHEMES == ("IOB1", "IOB2", "BIOES")


# -- which tag may follow which (the CRF's constraints) ---------------------------------------


def test_allowed_transitions_none_is_all_true():
    start, trans, end = allowed_transitions(["O", "B-X", "I-X"], None)
    assert start == end == [True] * 3 and trans == [[True] * 3] * 3


def test_allowed_transitions_iob2_by_hand():
    start, trans, end = allowed_transitions(IOB2_LABELS, "IOB2")
    T, F = True, False
    assert start == [T, T, F, T, F]
    assert end == [T, T, T, T, T]
    assert trans == [
        # to: O  B-PER I-PER B-LOC I-LOC        from:
        [T, T, F, T, F],  # O
        [T, T, T, T, F],  # B-PER
        [T, T, T, T, F],  # I-PER
        [T, T, F, T, T],  # B-LOC
        [T, T, F, T, T],  # I-LOC
    ]


def test_allowed_transitions_bioes_by_hand():
    labels = ["O", "B-X", "I-X", "E-X", "S-X", "B-Y", "E-Y"]
    start, trans, end = allowed_transitions(labels, "BIOES")
    T, F = True, False
    assert start == [T, T, F, F, T, T, F]
    assert end == [T, F, F, T, T, F, T]
    assert trans == [
        # to: O  B-X I-X E-X S-X B-Y E-Y      from:
        [T, T, F, F, T, T, F],  # O
        [F, F, T, T, F, F, F],  # B-X
        [F, F, T, T, F, F, F],  # I-X
        [T, T, F, F, T, T, F],  # E-X
        [T, T, F, F, T, T, F],  # S-X
        [F, F, F, F, F, F, T],  # B-Y
        [T, T, F, F, T, T, F],  # E-Y
    ]


def test_allowed_transitions_errors():
    with pytest.raises(ValueError, match="IOBX"):
        allowed_transitions(IOB2_LABELS, "IOBX")
    with pytest.raises(ValueError, match="E-PER"):
        allowed_transitions(["O", "E-PER"], "IOB2")

# -- entity spans: strict, as scoring reads them ------------------------------------------------


def test_entity_spans_are_strict_iob2():
    tags = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-ORG", "I-PER", "B-LOC"]
    # I-LOC after O opens no entity; I-PER after B-ORG neither continues nor opens one
    assert entity_spans(tags) == [("PER", 0, 2), ("ORG", 5, 6), ("LOC", 7, 8)]
    # the lenient (conlleval) reading of the same tags finds two more
    assert {(t, a, b) for _, t, a, b in conlleval_entities([tags])} == {
        ("PER", 0, 2), ("LOC", 3, 5), ("ORG", 5, 6), ("PER", 6, 7), ("LOC", 7, 8)}


def test_entity_spans_bioes_and_iob1_corpus_tags_read_after_conversion():
    assert entity_spans(["B-PER", "E-PER", "O", "S-LOC", "B-ORG", "I-ORG"], "BIOES") == [
        ("PER", 0, 2), ("LOC", 3, 4)]  # an entity never closed by E- is none
    # an IOB1 corpus sentence: every entity starts with I- unless it follows one of its type
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    assert entity_spans(iob1) == [("PER", 2, 3)]  # read strictly as IOB2 only the B- entity is one ...
    # ... which is why readers convert IOB1 corpora to IOB2 before anything reads their entities
    assert entity_spans(convert_scheme(iob1, "IOB1", "IOB2")) == [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]


def test_strict_entities_count_per_sentence_and_name_a_bad_scheme():
    assert strict_entities([["B-PER"], ["O", "B-LOC", "I-LOC"]]) == {(0, "PER", 0, 1), (1, "LOC", 1, 3)}
    with pytest.raises(ValueError, match="IOB1"):
        strict_entities([["B-PER"]], "IOB1")  # a corpus scheme, not one a model predicts in


# -- entities cut at a sentence edge --------------------------------------------------------------


def test_entities_cut_at_a_sentence_edge_are_closed():
    iob2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    assert close_entities(["I-PER", "I-PER", "O"], "IOB2", iob2) == ["B-PER", "I-PER", "O"]
    assert close_entities(["O", "B-LOC", "I-LOC"], "IOB2", iob2) == ["O", "B-LOC", "I-LOC"]  # nothing cut
    bioes = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    assert close_entities(["E-PER", "O", "B-PER"], "BIOES", bioes) == ["S-PER", "O", "S-PER"]
    assert close_entities(["I-PER", "I-PER"], "BIOES", bioes) == ["B-PER", "E-PER"]
    assert close_entities(["I-PER"], "IOB2", ["O", "I-PER"]) == ["I-PER"]  # no B-PER label: left alone
    assert close_entities(["NOUN", "VERB"], None, ["NOUN", "VERB"]) == ["NOUN", "VERB"]  # POS: untouched
