"""The Python API: ``tagger.load(source)`` -> a :class:`Pipeline` that tags text.

    import tagger
    nlp = tagger.load("runs/ud_ewt/self_attention-softmax/2025-01-01_00-00-00_seed1")
    for sentence in nlp("The state-of-the-art tagger ran. It was fast."):
        print(sentence.tokens, sentence.tags, sentence.offsets)

``source`` is a run dir, a report's ``best.json``, a ``.ckpt`` file or a BentoML model-store tag
(``tagger:latest``). A pipeline tags

* a ``str``: raw text, split into sentences and tokens the way the model's training corpus was
  (:mod:`tagger.tokenize`, the convention saved with the model) -> ``list[Sentence]``;
* a ``list[str]``: several raw texts -> one ``list[Sentence]`` per text;
* a ``list[list[str]]``: pre-tokenised sentences -> one :class:`Sentence` each.

The sentences of one text are one document: a model trained with document context sees them together. The command line
(``tagger predict``) and the service tag through the same :class:`tagger.inference.predictor.Predictor`, the same
tokenizer and the same entity decoding (:func:`entity_spans`).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Sequence

from tagger.limits import BATCH_SIZE
from tagger.tokenize import Token, sentences as split_sentences

if TYPE_CHECKING:
    from tagger.data.vocab import Vocab
    from tagger.inference.predictor import Predictor
    from tagger.models.tagger import Tagger

@dataclass
class Span:
    """An entity: tokens ``token_start:token_end``; characters ``start:end`` of the text (None for tokens given)."""
    label: str
    text: str
    token_start: int
    token_end: int
    start: int | None
    end: int | None
    score: float  # mean tag probability over its tokens


@dataclass
class TaskTags:
    """One task's answer for a sentence of a multi-task model."""
    tags: list[str]
    scores: list[float]
    spans: list[Span] | None = None  # entities, for an entity task (None for POS)


@dataclass
class Sentence:
    """A tagged sentence. A multi-task model's also has ``tasks``, each task's tags by name; its ``tags`` and
    ``scores`` are then its first task's, and ``spans`` its first entity task's."""
    tokens: list[str]
    tags: list[str]
    scores: list[float]
    offsets: list[tuple[int, int]] | None = None  # (start, end) of each token in the text; None for tokens given
    spans: list[Span] | None = None  # entities, for entity taggers (None for POS)
    tasks: dict[str, TaskTags] | None = None  # a multi-task model's tasks, in its order (None: a model of one task)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (absent parts left out, a POS task's spans included)."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if "tasks" in out:
            out["tasks"] = {name: {k: v for k, v in task.items() if v is not None} for name, task in out["tasks"].items()}
        return out


def entity_spans(tokens: Sequence[str], tags: Sequence[str], scores: Sequence[float],
                 offsets: Sequence[tuple[int, int]] | None = None, text: str | None = None,
                 scheme: str | None = "IOB2") -> list[Span]:
    """Entities of one tagged sentence, read as scoring reads them (:func:`tagger.schemes.entity_spans`, strict:
    an I- after O opens none)."""
    from tagger import schemes

    spans = []
    for label, first, stop in schemes.entity_spans(list(tags), scheme or "IOB2"):
        last = stop - 1
        start, end = (offsets[first][0], offsets[last][1]) if offsets else (None, None)
        spans.append(Span(label=label,
                          text=text[start:end] if text is not None and offsets else " ".join(tokens[first:last + 1]),
                          token_start=first, token_end=last + 1, start=start, end=end,
                          score=sum(scores[first:last + 1]) / (last + 1 - first)))
    return spans


def make_sentence(tokens: Sequence[str], tags: Sequence[str], scores: Sequence[float],
                  offsets: Sequence[Sequence[int]] | None = None, text: str | None = None, task: str = "pos",
                  scheme: str | None = "IOB2") -> Sentence:
    """One tagged sentence as every surface returns it (the API, ``tagger predict``, the service)."""
    where = [(int(a), int(b)) for a, b in offsets] if offsets is not None else None
    spans = entity_spans(tokens, tags, scores, where, text, scheme) if task == "ner" else None
    return Sentence(list(tokens), list(tags), list(scores), where, spans)


def make_task_sentence(tokens: Sequence[str], predictions: Mapping[str, tuple[Sequence[str], Sequence[float]]],
                       kinds: Mapping[str, tuple[str, str | None]], offsets: Sequence[Sequence[int]] | None = None,
                       text: str | None = None) -> Sentence:
    """One sentence of a multi-task model: ``predictions`` task name -> (tags, scores), ``kinds`` task name ->
    (task kind, tag scheme); ``tags``/``scores`` are the first task's, ``spans`` the first entity task's."""
    tasks = {name: make_sentence(tokens, tags, scores, offsets, text, *kinds[name])
             for name, (tags, scores) in predictions.items()}
    first = next(iter(tasks.values()))
    spans = next((t.spans for t in tasks.values() if t.spans is not None), None)
    return replace(first, spans=spans, tasks={name: TaskTags(t.tags, t.scores, t.spans) for name, t in tasks.items()})


def _shifted(spans: Sequence[Span], first: int) -> list[Span]:
    return [replace(s, token_start=s.token_start + first, token_end=s.token_end + first) for s in spans]


def join_sentences(sentences: Sequence[Sentence], task: str) -> dict[str, Any]:
    """The sentences of one text as one record: tokens, tags, scores and offsets in text order, ``sentences`` as
    ``[start, end)`` token ranges, and entity ``spans`` (token indices counted over the whole text). Sentences of a
    multi-task model add ``tasks``: per task its ``tags``, ``scores`` and, for an entity task, ``spans``."""
    out: dict[str, Any] = {"tokens": [], "tags": [], "scores": [], "offsets": [], "sentences": []}
    spans: list[Span] = []
    tasks: dict[str, dict[str, Any]] = {}
    for sentence in sentences:
        first = len(out["tokens"])
        out["sentences"].append((first, first + len(sentence.tokens)))
        out["tokens"] += sentence.tokens
        out["tags"] += sentence.tags
        out["scores"] += sentence.scores
        out["offsets"] += sentence.offsets or []
        spans += _shifted(sentence.spans or [], first)
        for name, answer in (sentence.tasks or {}).items():
            joined = tasks.setdefault(name, {"tags": [], "scores": []} | ({"spans": []} if answer.spans is not None
                                                                         else {}))
            joined["tags"] += answer.tags
            joined["scores"] += answer.scores
            if answer.spans is not None:
                joined["spans"] += [asdict(s) for s in _shifted(answer.spans, first)]
    if task == "ner" or any("spans" in t for t in tasks.values()):
        out["spans"] = [asdict(s) for s in spans]
    if tasks:
        out["tasks"] = tasks
    return out


ACCEPTED = "a string (one text), a list of strings (texts) or a list of token lists (pre-tokenised sentences)"


def _shown(value: Any) -> str:
    """``value`` for an error message: its type and a short repr."""
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def classify_inputs(inputs: Any) -> tuple[str, list]:
    """Which input a :class:`Pipeline` was given, ``"text"``, ``"texts"`` or ``"sentences"``, and its items. Anything
    else is a TypeError naming what is accepted and what was given (for a list, the first item that does not fit)."""
    if isinstance(inputs, str):
        return "text", [inputs]
    if isinstance(inputs, (bytes, bytearray)):
        raise TypeError(f"expected {ACCEPTED}, got {type(inputs).__name__}: decode it to a str first")
    if isinstance(inputs, Mapping) or not isinstance(inputs, Iterable):
        raise TypeError(f"expected {ACCEPTED}, got {_shown(inputs)}")
    items = list(inputs)
    kind = "sentences" if items and isinstance(items[0], (list, tuple)) else "texts"
    for i, item in enumerate(items):
        if kind == "texts" and not isinstance(item, str):
            raise TypeError(f"expected {ACCEPTED}; item 0 is a string (a text) but item {i} is {_shown(item)}"
                            if i else f"expected {ACCEPTED}; item 0 is {_shown(item)}")
        if kind == "sentences" and not isinstance(item, (list, tuple)):
            raise TypeError(f"expected {ACCEPTED}; item 0 is a token list (a sentence) but item {i} is "
                            f"{_shown(item)}")
        for j, token in enumerate(item if kind == "sentences" else ()):
            if not isinstance(token, str):
                raise TypeError(f"expected {ACCEPTED}; sentence {i}, token {j} is {_shown(token)}, not a string")
    return kind, items


class Pipeline:
    """A loaded tagger with its vocabulary, labels and tokenizer convention; call it on text or tokens."""

    def __init__(self, model: Tagger, vocab: Vocab, name: str, batch_size: int = BATCH_SIZE, backend: str = "fp32"):
        from tagger.inference.backends import make_predictor

        self.name, self.vocab = name, vocab
        self.predictor: Predictor = make_predictor(model, vocab, backend, batch_size=batch_size)

    def __repr__(self) -> str:
        if self.vocab.tasks is not None:
            return f"Pipeline({self.name!r}, tasks={self.tasks!r}, tokenizer={self.tokenizer!r})"
        return f"Pipeline({self.name!r}, task={self.task!r}, tokenizer={self.tokenizer!r}, labels={len(self.labels)})"

    @property
    def tasks(self) -> list[str]:
        """The model's task names (a multi-task model's, in order; a single-task model's one task kind)."""
        return self.vocab.task_names

    def task_labels(self, name: str) -> list[str]:
        """The labels of the task ``name`` (ValueError naming the model's tasks for another)."""
        return list(self.vocab.for_task(name).labels)

    @property
    def labels(self) -> list[str]:
        """The labels of the model's task (of a multi-task model: of its first task; :meth:`task_labels`)."""
        return list(self.vocab.labels)

    @property
    def task(self) -> str:
        return self.vocab.task

    @property
    def tag_scheme(self) -> str | None:
        return self.vocab.tag_scheme

    @property
    def tokenizer(self) -> str:
        """The tokenization convention of the training corpus (``ud``, ``conll`` or ``whitespace``)."""
        return self.vocab.tokenizer

    @property
    def supports_attention(self) -> bool:
        return self.predictor.tagger.supports_attention

    def tokenize(self, text: str) -> list[list[Token]]:
        """``text`` as sentences of ``(token, start, end)``, cut as the model's training corpus was."""
        return split_sentences(text, self.tokenizer)

    def __call__(self, inputs: str | Sequence[str] | Sequence[Sequence[str]]):
        kind, items = classify_inputs(inputs)
        if kind == "text":
            return self.tag_texts([inputs])[0]
        return self.tag_texts(items) if kind == "texts" else self.tag_sentences(items)

    def tag_texts(self, texts: Sequence[str]) -> list[list[Sentence]]:
        """Each raw text -> its sentences; the sentences of one text are one document."""
        split = [self.tokenize(text) for text in texts]
        flat = [(i, sent) for i, sents in enumerate(split) for sent in sents]
        tagged = self.tag([[t for t, _, _ in sent] for _, sent in flat], [i for i, _ in flat],
                          [[(a, b) for _, a, b in sent] for _, sent in flat], [texts[i] for i, _ in flat])
        out: list[list[Sentence]] = [[] for _ in texts]
        for (i, _), sentence in zip(flat, tagged):
            out[i].append(sentence)
        return out

    def tag_sentences(self, sentences: Sequence[Sequence[str]]) -> list[Sentence]:
        """Pre-tokenised sentences, each tagged alone. An empty token is a ValueError naming its sentence and index:
        no tokenizer makes one, and the model would tag it as a word without characters."""
        for i, sentence in enumerate(sentences):
            if "" in sentence:
                raise ValueError(f"sentence {i}, token {list(sentence).index('')} is an empty string; "
                                 "a token has at least one character")
        return self.tag([list(s) for s in sentences])

    def tag(self, sentences: list[list[str]], docs: Sequence[Hashable] | None = None,
            offsets: Sequence[list[tuple[int, int]]] | None = None,
            texts: Sequence[str] | None = None) -> list[Sentence]:
        """Tokens -> :class:`Sentence` s (the API and ``tagger predict``): ``docs`` groups adjacent sentences into
        documents; ``offsets``/``texts`` locate each sentence's tokens in its text."""
        nonempty = [i for i, s in enumerate(sentences) if s]
        if self.vocab.tasks is not None:  # every task from one encoder pass
            return self._tag_tasks(sentences, nonempty, docs, offsets, texts)
        preds = dict(zip(nonempty, self.predictor.predict([sentences[i] for i in nonempty],
                                                          [docs[i] for i in nonempty] if docs is not None else None)))
        return [make_sentence(tokens, [p.tag for p in preds.get(i, [])], [p.score for p in preds.get(i, [])],
                              offsets[i] if offsets is not None else None, texts[i] if texts is not None else None,
                              self.task, self.vocab.tag_scheme)
                for i, tokens in enumerate(sentences)]

    def _tag_tasks(self, sentences: list[list[str]], nonempty: list[int], docs: Sequence[Hashable] | None,
                   offsets: Sequence[list[tuple[int, int]]] | None, texts: Sequence[str] | None) -> list[Sentence]:
        by_task = self.predictor.predict_tasks([sentences[i] for i in nonempty],
                                               [docs[i] for i in nonempty] if docs is not None else None)
        kinds = {name: (view.task, view.tag_scheme) for name, view in
                 ((name, self.vocab.for_task(name)) for name in self.predictor.task_names)}
        position = {i: j for j, i in enumerate(nonempty)}
        out = []
        for i, tokens in enumerate(sentences):
            j = position.get(i)
            predictions = {name: ([p.tag for p in preds[j]], [p.score for p in preds[j]]) if j is not None else ([], [])
                           for name, preds in by_task.items()}
            out.append(make_task_sentence(tokens, predictions, kinds, offsets[i] if offsets is not None else None,
                                          texts[i] if texts is not None else None))
        return out

    def attention(self, tokens: str | Sequence[str]) -> list[list[list[list[float]]]]:
        """Attention weights ``[layer][head][query][key]`` of one sentence (a text is tokenised as one sentence);
        raises :class:`tagger.models.tagger.AttentionNotSupported` for an encoder without attention."""
        words = [t for sent in self.tokenize(tokens) for t, _, _ in sent] if isinstance(tokens, str) else list(tokens)
        return self.predictor.attention(words)


class LoadError(RuntimeError):
    """The source names no loadable model."""


def load_model(source: str | os.PathLike) -> tuple[Tagger, Vocab, str]:
    """(model, vocabulary, name) of a run dir, best.json, .ckpt file or BentoML model-store tag
    (resolved by :mod:`tagger.artifacts.runs`, as every other command does)."""
    from tagger.artifacts import runs
    from tagger.artifacts.checkpoint import CheckpointError

    try:
        resolved = runs.resolve(source)
        loaded = runs.load(resolved)
    except CheckpointError as e:  # runs.RunError included
        raise LoadError(str(e)) from e
    except ImportError:
        raise LoadError(f"{str(source)!r} is not a file or folder; to load it from the BentoML model store, "
                        "install the serve extra (pip install 'tagger[serve]')") from None
    except Exception as e:  # bentoml.exceptions.NotFound: no such model in the store
        if type(e).__name__ != "NotFound":
            raise
        raise LoadError(f"{str(source)!r}: no such run dir, best.json or checkpoint, and no such model in the "
                        "BentoML store (`bentoml models list`)") from None
    return loaded.tagger, loaded.vocab, resolved.store_tag or str(source)


def load(source: str | os.PathLike, *, threads: int | None = None, batch_size: int = BATCH_SIZE,
         backend: str = "fp32") -> Pipeline:
    """A :class:`Pipeline` for the model at ``source``. ``threads``: torch CPU threads (None: torch's default);
    ``batch_size``: at most that many windows per forward pass (within the padded-token budget of
    :class:`tagger.inference.predictor.Predictor`); ``backend``: what computes the model
    (:mod:`tagger.inference.backends`: fp32, bf16, int8, onnx, onnx-int8)."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    model, vocab, name = load_model(source)
    return Pipeline(model, vocab, name, batch_size=batch_size, backend=backend)
