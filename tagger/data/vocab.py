"""Word, character and label vocabularies.

Built once from the training split (``Vocab.build``), saved next to every run and inside every
checkpoint (``to_dict``), and loaded — never rebuilt — for evaluation, packaging and serving.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from tagger.fileio import write_text
from tagger.tokenize import check_convention, default_convention

if TYPE_CHECKING:
    from tagger.data.vectors import Vectors

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
IGNORE_INDEX = -100  # the one ignore index: tag id of padding positions

_DIGITS = re.compile(r"\d")


@dataclass
class Vocab:
    words: list[str]
    chars: list[str]
    labels: list[str]
    task: str = "pos"
    tag_scheme: str | None = None  # "IOB2"/"BIOES" for entity tasks, None for POS
    lowercase: bool = False
    normalize_digits: bool = True
    counts: list[int] | None = None  # training frequency of each word (PAD, UNK: 0); None if a saved vocab has none
    case_fallback: bool = False  # a word not in the vocabulary takes the id of its most frequent other casing
    # pretrained vectors: words[:trained_words] come from training, the rest from the vectors (None: all from training)
    trained_words: int | None = None
    vectors: str | None = None  # the vectors source the vector words came from
    # how raw text is cut into tokens for this model (tagger.tokenize); None in a vocab saved without one: the
    # convention of the task's corpus
    tokenizer: str | None = None
    _word_index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _lower_index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _char_index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, items in (("words", self.words), ("chars", self.chars)):
            if items[:2] != [PAD, UNK]:
                raise ValueError(f"vocab {name} must start with {PAD!r}, {UNK!r}; got {items[:2]}")
        if self.counts is not None and len(self.counts) != len(self.words):
            raise ValueError(f"vocab counts has {len(self.counts)} entries for {len(self.words)} words")
        if self.trained_words is not None and not 2 <= self.trained_words <= len(self.words):
            raise ValueError(f"vocab trained_words {self.trained_words} is outside 2..{len(self.words)}")
        self._word_index = {w: i for i, w in enumerate(self.words)}
        if self.case_fallback:
            # words are in frequency order: the first casing met is the most frequent one
            for i, w in enumerate(self.words[2:self.num_trained], start=2):
                self._lower_index.setdefault(w.lower(), i)
        self._char_index = {c: i for i, c in enumerate(self.chars)}
        self.tokenizer = check_convention(self.tokenizer or default_convention(self.task))

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        sentences: Iterable[list[str]],
        labels: list[str],
        task: str,
        tag_scheme: str | None = None,
        min_freq: int = 1,
        lowercase: bool = False,
        normalize_digits: bool = True,
        case_fallback: bool = False,
        vectors: "Vectors | None" = None,
        tokenizer: str | None = None,
        base: "Vocab | None" = None,
    ) -> "Vocab":
        """``vectors``: the words of pretrained vectors join the vocabulary after the training words (normalised
        like them; the first, most frequent, form wins), so a word never seen in training still reaches the
        model through its vector in evaluation and serving.

        ``base``: the vocabulary of a trained model this one starts from (``init_from``, :mod:`tagger.training.transfer`).
        Its training words come first, in its order, then this corpus's words it lacks; its characters likewise.
        Its word normalisation (lowercase, digits, case fallback) is kept, since its rows were trained on it."""
        if min_freq < 1:
            raise ValueError(f"data.min_freq must be >= 1, got {min_freq}")
        if base is not None:
            lowercase, normalize_digits, case_fallback = base.lowercase, base.normalize_digits, base.case_fallback
        probe = cls([PAD, UNK], [PAD, UNK], labels, task, tag_scheme, lowercase, normalize_digits)
        words: Counter[str] = Counter()
        chars: Counter[str] = Counter()
        for tokens in sentences:
            words.update(probe.normalize(t) for t in tokens)
            for t in tokens:
                chars.update(t)  # characters keep their case: the char CNN sees capitalisation
        # frequency order (ties alphabetical) keeps ids stable across runs on the same data
        kept = sorted((w for w, n in words.items() if n >= min_freq), key=lambda w: (-words[w], w))
        char_list = sorted(chars, key=lambda c: (-chars[c], c))
        if base is not None:
            inherited = base.words[2:base.num_trained]
            known_words = set(inherited)
            kept = inherited + [w for w in kept if w not in known_words]
            known_chars = set(base.chars)
            char_list = base.chars[2:] + [c for c in char_list if c not in known_chars]
        extra: list[str] = []
        if vectors is not None:
            known = set(kept) | {PAD, UNK}
            for w in map(probe.normalize, vectors.words):
                if w not in known:
                    known.add(w)
                    extra.append(w)
        return cls(
            [PAD, UNK] + kept + extra,
            [PAD, UNK] + char_list,
            list(labels),
            task,
            tag_scheme,
            lowercase,
            normalize_digits,
            counts=[0, 0] + [words[w] for w in kept] + [0] * len(extra),
            case_fallback=case_fallback,
            trained_words=2 + len(kept) if vectors is not None else None,
            vectors=vectors.source if vectors is not None else None,
            tokenizer=tokenizer,
        )

    @property
    def num_trained(self) -> int:
        """Number of ids (PAD and UNK included) that come from the training split; the rest are vector words."""
        return len(self.words) if self.trained_words is None else self.trained_words

    # -- tasks ------------------------------------------------------------------------------
    @property
    def tasks(self) -> dict[str, dict] | None:
        """A multi-task model's tasks (:class:`MultiTaskVocab`); None: a model of one task, whose labels, task and
        tag scheme are the fields above."""
        return None

    @property
    def task_names(self) -> list[str]:
        """The names of the model's tasks: a multi-task model's, in order; a single-task model's one task kind."""
        return list(self.tasks) if self.tasks is not None else [self.task]

    def for_task(self, name: str) -> "Vocab":
        """The vocabulary of the task ``name``: a single-task vocabulary is its own one task; a multi-task one gives
        a :class:`Vocab` with that task's labels, kind and scheme that shares its words, characters and their
        indices (nothing is copied or rebuilt)."""
        if self.tasks is None:
            if name != self.task:
                raise ValueError(f"task {name!r}: the model has one task, {self.task!r}")
            return self
        if name not in self.tasks:
            raise ValueError(f"task {name!r}: the model's tasks are {', '.join(self.tasks)}")
        spec = self.tasks[name]
        view = object.__new__(Vocab)
        view.__dict__.update({k: v for k, v in self.__dict__.items() if k != "tasks"})
        view.labels, view.task, view.tag_scheme = list(spec["labels"]), spec["task"], spec.get("tag_scheme")
        return view

    # -- encoding ---------------------------------------------------------------------------
    def normalize(self, word: str) -> str:
        if self.lowercase:
            word = word.lower()
        if self.normalize_digits:
            word = _DIGITS.sub("0", word)
        return word

    def _lookup(self, word: str) -> int | None:
        """The vocabulary id of ``word``, None when it is not in the vocabulary."""
        word = self.normalize(word)
        i = self._word_index.get(word)
        if i is None and self.case_fallback:
            i = self._lower_index.get(word.lower())  # "KENNEDY" -> "Kennedy", "Studying" -> "studying"
        if i is None and self.vectors is not None:
            i = self._word_index.get(word.lower())  # vector words: exact first, then lowercased (GloVe is uncased)
        return i

    def word_id(self, word: str) -> int:
        i = self._lookup(word)
        return UNK_ID if i is None else i

    def char_ids(self, word: str) -> list[int]:
        return [self._char_index.get(c, UNK_ID) for c in word]

    def is_unseen(self, word: str) -> bool:
        """True for a word outside the training vocabulary (it reaches the model as UNK, or through its vector)."""
        i = self._lookup(word)
        return i is None or i >= self.num_trained

    def is_unknown(self, word: str) -> bool:
        """True for a word with no row in the vocabulary: neither in training nor in the vectors (it reaches the
        model as UNK, with only its characters to go by)."""
        return self._lookup(word) is None

    # -- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The saved fields as plain data. Not ``dataclasses.asdict``: that deep-copies the private indexes too (a
        dict per word, 400k entries with GloVe vectors) only to drop them, and a checkpoint is written every epoch.
        The lists are copied (their items are strings and ints), so the dict does not alias the vocabulary."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), list) else v
                for f in fields(self) if not f.name.startswith("_")}

    @classmethod
    def from_dict(cls, d: dict) -> "Vocab":
        """A :class:`MultiTaskVocab` where ``d`` has tasks, else a Vocab."""
        return MultiTaskVocab(**d) if d.get("tasks") is not None else cls(**d)

    def save(self, path: str | Path) -> None:
        write_text(path, json.dumps(self.to_dict(), ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass
class MultiTaskVocab(Vocab):
    """The vocabulary of a model of several tasks: one word and character table for all of them, and each task's
    labels in ``tasks`` (saved with the rest: :meth:`Vocab.to_dict`). The fields labels, task and tag_scheme are its
    first task's; :meth:`Vocab.for_task` gives any task's."""

    # name -> {"task": "pos"|"ner", "labels": [...], "tag_scheme": ...}, in the model's order of tasks (required; its
    # class default shadows Vocab.tasks, the property that is None for a model of one task)
    tasks: dict[str, dict] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        first = next(iter((self.tasks or {}).values()), None)
        if first is None or (list(first["labels"]), first["task"], first.get("tag_scheme")) != \
                (list(self.labels), self.task, self.tag_scheme):
            raise ValueError("vocab tasks: a multi-task vocabulary's labels, task and tag_scheme are its first task's")

    @classmethod
    def with_tasks(cls, vocab: Vocab, tasks: dict[str, dict]) -> "MultiTaskVocab":
        """``vocab`` (built from every task's training split) with the tasks' labels; the first task's are ``vocab``'s
        own."""
        return cls(**vocab.to_dict(), tasks=tasks)
