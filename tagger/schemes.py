"""Entity tag schemes (IOB1, IOB2, BIOES): the one place that knows what a tag prefix means.

* Corpora come in any of :data:`SCHEMES`; :func:`convert_scheme` turns one sentence's tags into another
  scheme (the readers convert IOB1 corpora to IOB2 this way).
* A model predicts in one of :data:`MODEL_SCHEMES`: :func:`allowed_transitions` says which tag may start,
  follow another and end a sentence (the CRF's constraints), :func:`entity_spans` reads the entities of
  a tagged sentence strictly (as scoring does), :func:`close_entities` makes whole an entity cut at the
  edge of a sentence taken out of a longer stream.
* :func:`map_label` renames a label or the entity type of a tag, for a model scored on (or started for) a
  corpus whose names differ.

Plain Python over tag strings: no torch, so the readers, the metrics and the service share it.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from seqeval.scheme import IOB2, IOBES, Entities

SCHEMES = ("IOB1", "IOB2", "BIOES")  # what a corpus may be written in
MODEL_SCHEMES = ("IOB2", "BIOES")  # what a model predicts, is constrained by and is scored in
NO_SCHEME = (None, "none", "NONE", "None")  # values of a corpus's `scheme` meaning "not entity tags"

# Prefixes a tag may carry in each scheme ("O" is always allowed on its own).
_PREFIXES = {"IOB1": ("B", "I"), "IOB2": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
_SEQEVAL = {"IOB2": IOB2, "BIOES": IOBES}

Span = tuple[str, int, int]  # (entity type, first token, end token exclusive)


def canonical_scheme(scheme: str) -> str:
    """The scheme's name as in :data:`SCHEMES` (case-insensitive); ValueError naming the allowed ones."""
    name = str(scheme).upper()
    if name not in SCHEMES:
        raise ValueError(f"unknown tagging scheme {scheme!r}; allowed schemes: {', '.join(SCHEMES)}")
    return name


def split_tag(tag: str, scheme: str) -> tuple[str, str | None]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', None). ValueError on a tag foreign to ``scheme``."""
    if tag == "O":
        return "O", None
    prefix, sep, label = tag.partition("-")
    if not sep or not label or prefix not in _PREFIXES[scheme]:
        allowed = ", ".join(f"{p}-TYPE" for p in _PREFIXES[scheme])
        raise ValueError(f"tag {tag!r} is not valid in the {scheme} scheme (expected O, {allowed})")
    return prefix, label


def entity_kind(label: str) -> tuple[str, str] | None:
    """``B-PER`` -> ``("B", "PER")``; None for a label without a one-letter prefix (``O``, ``NOUN``). Unlike
    :func:`split_tag` it takes any label set, a POS tagger's included."""
    prefix, sep, kind = label.partition("-")
    return (prefix, kind) if sep and len(prefix) == 1 else None


def map_label(label: str, label_map: Mapping[str, str]) -> str:
    """A source label under ``label_map``: the whole label (``NOUN`` -> ``PROPN``) or the entity type of a tag
    (``person`` -> ``PER`` turns ``B-person`` into ``B-PER``). A type mapped to ``O`` drops the entity."""
    if label in label_map:
        return label_map[label]
    split = entity_kind(label)
    if split and split[1] in label_map:
        prefix, kind = split
        return "O" if label_map[kind] == "O" else f"{prefix}-{label_map[kind]}"
    return label


# --------------------------------------------------------------------------- #
# Conversion between schemes
# --------------------------------------------------------------------------- #


def _lenient_spans(tags: list[str], scheme: str) -> list[tuple[int, int, str]]:
    """Decode tags into entity spans ``(start, end_exclusive, type)``.

    Decoding is lenient in the way conlleval is: an I- (or E-) tag that cannot
    continue the current entity (after O, after another type, or after an
    entity that was already closed by E-/S-) starts a new one instead of being
    rejected.  This makes IOB1 and IOB2 decoding the same procedure.
    """
    spans: list[tuple[int, int, str]] = []
    start: int | None = None  # start of the entity that may still be continued
    current: str | None = None
    for i, tag in enumerate(tags):
        prefix, label = split_tag(tag, scheme)
        continues = prefix in ("I", "E") and start is not None and label == current
        if start is not None and not continues:
            spans.append((start, i, current))  # type: ignore[arg-type]
            start, current = None, None
        if prefix == "O":
            continue
        if not continues:
            start, current = i, label
        if prefix in ("E", "S"):
            # BIOES closes the entity explicitly: a following I-/E- must start anew.
            spans.append((start, i + 1, current))  # type: ignore[arg-type]
            start, current = None, None
    if start is not None:
        spans.append((start, len(tags), current))  # type: ignore[arg-type]
    return spans


def _encode(spans: list[tuple[int, int, str]], length: int, scheme: str) -> list[str]:
    tags = ["O"] * length
    prev_end, prev_type = -1, None
    for start, end, label in spans:
        if scheme == "BIOES" and end - start == 1:
            tags[start] = f"S-{label}"
        else:
            if scheme == "IOB1":
                # IOB1 only marks a beginning when it is needed to separate two
                # adjacent entities of the same type.
                first = "B" if (prev_end == start and prev_type == label) else "I"
            else:
                first = "B"
            tags[start] = f"{first}-{label}"
            for i in range(start + 1, end):
                tags[i] = f"I-{label}"
            if scheme == "BIOES":
                tags[end - 1] = f"E-{label}"
        prev_end, prev_type = end, label
    return tags


def convert_scheme(tags: list[str], source: str, target: str) -> list[str]:
    """Convert one sentence's entity tags from scheme `source` to scheme `target`.

    Conversion decodes the tags into entity spans and re-encodes them, so
    ill-formed input (e.g. IOB2 ``O I-PER``) is normalised the way conlleval
    reads it, even when ``source == target``.
    """
    source, target = canonical_scheme(source), canonical_scheme(target)
    return _encode(_lenient_spans(list(tags), source), len(tags), target)


# --------------------------------------------------------------------------- #
# What a model may predict, and how its entities are read
# --------------------------------------------------------------------------- #


def _model_scheme(scheme: str) -> str:
    if scheme not in MODEL_SCHEMES:
        raise ValueError(f"unknown tagging scheme {scheme!r}; expected one of {MODEL_SCHEMES}")
    return scheme


def allowed_transitions(labels: Sequence[str], scheme: str | None) -> tuple[list[bool], list[list[bool]], list[bool]]:
    """
    Which starts, transitions and ends a tagging scheme permits.

    Args:
        labels: tag names; index i of the result corresponds to labels[i].
        scheme: None (everything allowed), "IOB2" or "BIOES".
    Returns:
        start (C,), trans (C, C) with trans[i][j] = may tag j follow tag i, end (C,); all bool.
    Raises:
        ValueError for an unknown scheme or a label the scheme cannot parse.
    """
    C = len(labels)
    start, trans, end = [True] * C, [[True] * C for _ in range(C)], [True] * C
    if scheme is None:
        return start, trans, end
    if scheme not in MODEL_SCHEMES:
        raise ValueError(f"unknown tagging scheme {scheme!r}; expected one of {MODEL_SCHEMES} or None")

    parsed = [split_tag(label, scheme) for label in labels]
    for j, (pj, tj) in enumerate(parsed):
        if scheme == "IOB2":
            # an entity can only be continued, never opened, by I-X
            start[j] = pj != "I"
            for i, (pi, ti) in enumerate(parsed):
                trans[i][j] = pj != "I" or (pi in "BI" and ti == tj)
        else:  # BIOES
            start[j] = pj in "BSO"
            end[j] = pj in "ESO"
            for i, (pi, ti) in enumerate(parsed):
                if pi in "BI":  # inside an open entity: must continue or close the same type
                    trans[i][j] = pj in "IE" and ti == tj
                else:  # after E-*, S-* or O no entity is open
                    trans[i][j] = pj in "BSO"
    return start, trans, end


def strict_entities(sentences: Sequence[Sequence[str]], scheme: str = "IOB2") -> set[tuple[int, str, int, int]]:
    """{(sentence, type, start, end exclusive)} under the scheme's strict grammar (seqeval's strict mode):
    an entity starts with B-X (or S-X in BIOES); an I-X after O is no entity."""
    # seqeval's Entities wants lists; it raises ValueError on a prefix the scheme lacks
    ents = Entities([list(s) for s in sentences], _SEQEVAL[_model_scheme(scheme)])
    return {e.to_tuple() for sent in ents.entities for e in sent}


def conlleval_entities(sentences: Sequence[Sequence[str]]) -> set[tuple[int, str, int, int]]:
    """{(sentence, type, start, end exclusive)} as conlleval chunks them (an I-X after O opens an entity)."""
    from seqeval.metrics.sequence_labeling import get_entities  # imports scikit-learn: only when asked

    # one sentence at a time so offsets are per sentence and chunks never cross sentences
    return {(i, etype, start, end + 1)  # seqeval's end is inclusive here
            for i, sent in enumerate(sentences) for etype, start, end in get_entities(list(sent))}


def entity_spans(tags: Sequence[str], scheme: str = "IOB2") -> list[Span]:
    """The entities of one tagged sentence, in order, read as scoring reads them (:func:`strict_entities`)."""
    return sorted(((etype, start, end) for _, etype, start, end in strict_entities([tags], scheme)),
                  key=lambda span: span[1])


# a sentence cut out of a document stream may begin (or, in BIOES, end) inside an entity carried across the
# sentence boundary: by a softmax head's per-token decisions, or where the sentence's tokens take their tags
# from two windows (the CRF itself decodes each sentence of a window as its own chain); entities never cross
# sentences, so the cut one is closed there
_OPEN_AT_START = {"IOB2": {"I": "B"}, "BIOES": {"I": "B", "E": "S"}}
_OPEN_AT_END = {"BIOES": {"B": "S", "I": "E"}}


def close_entities(tags: list[str], scheme: str | None, labels: Sequence[str]) -> list[str]:
    """``tags`` of one sentence with an entity cut at either edge made whole (IOB2: a leading I-X -> B-X;
    BIOES: leading I-/E- -> B-/S-, trailing B-/I- -> S-/E-), where the replacement is a known label."""
    tags = list(tags)
    for pos, table in ((0, _OPEN_AT_START.get(scheme or "", {})), (-1, _OPEN_AT_END.get(scheme or "", {}))):
        if tags and "-" in tags[pos]:
            prefix, _, kind = tags[pos].partition("-")
            fixed = f"{table.get(prefix, prefix)}-{kind}"
            if fixed in labels:
                tags[pos] = fixed
    return tags
