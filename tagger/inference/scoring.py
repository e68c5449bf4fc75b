"""A trained tagger scored on a labelled split: the prediction and scoring that training (dev and test after
fitting), ``tagger evaluate`` and the reports use.

:func:`score_split` tags the split's sentences with a :class:`~tagger.inference.predictor.Predictor` (within their
documents) and scores them with the task's metrics (:func:`tagger.metrics.task_metrics`); :func:`load_corpus`
rebuilds a run's corpus from its saved config.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import datasets

from tagger.data.encoding import split_docs
from tagger.data.vocab import Vocab
from tagger.inference.predictor import Predictor
from tagger.limits import BATCH_SIZE
from tagger.metrics import SELECTION, task_metrics, tasks_mean
from tagger.models.tagger import Tagger
from tagger.schemes import map_label


@dataclass
class SplitEvaluation:
    """What :func:`score_split` measured: the metrics, and the tags they were computed from."""

    metrics: dict[str, Any]
    gold: list[list[str]]
    pred: list[list[str]]
    unseen: list[list[bool]]  # per token: not in the model's training vocabulary
    unknown: list[list[bool]]  # per token: in no row of the vocabulary (unseen and without a vector: UNK)
    seconds: float  # prediction of the whole split, after the warm-up
    n_tokens: int
    window: int  # the predictor's window and overlap (sentences longer than the window are tagged in pieces)
    overlap: int


def score_split(tagger: Tagger, vocab: Vocab, split: datasets.Dataset, batch_size: int = BATCH_SIZE,
                window: int | None = None, warmup: int = 0,
                label_map: dict[str, str] | None = None, task: str | None = None) -> SplitEvaluation:
    """Tag the split with a :class:`~tagger.inference.predictor.Predictor` and score it with the task's metrics.

    Sentences are tagged within their documents (the split's ``doc`` column) when the model was trained with
    document context. ``window``: the predictor's window (default: the model's limit). ``warmup``: that many
    sentences are tagged once before the timed pass (first-call allocations are not prediction speed).
    ``label_map``: the model's labels or entity types renamed before scoring (:func:`tagger.schemes.map_label`;
    a type mapped to ``O`` is dropped), to score a model on a corpus whose names differ (zero-shot transfer).
    ``task``: which task of a multi-task model the split is labelled for (default: its first)."""
    predictor = Predictor(tagger, vocab, batch_size=batch_size, window=window, tasks=None if task is None else [task])
    vocab = vocab.for_task(predictor.task_names[0])  # that task's labels, kind and scheme
    names = split.features["tags"].feature.names
    tokens = split["tokens"]
    gold = [[names[t] for t in tags] for tags in split["tags"]]
    if warmup:
        predictor.tags(tokens[:warmup])
    started = time.perf_counter()
    pred = predictor.tags(tokens, split_docs(split))
    seconds = time.perf_counter() - started
    if label_map:
        renamed = {label: map_label(label, label_map) for label in vocab.labels}
        pred = [[renamed[t] for t in sent] for sent in pred]
    unseen = [[vocab.is_unseen(w) for w in sent] for sent in tokens]
    unknown = [[vocab.is_unknown(w) for w in sent] for sent in tokens]
    metrics = task_metrics(vocab.task, gold, pred, unseen, vocab.tag_scheme or "IOB2")
    n = sum(len(s) for s in tokens)
    metrics["predict_tokens_per_s"] = round(n / seconds, 1) if seconds else None
    return SplitEvaluation(metrics, gold, pred, unseen, unknown, seconds, n, predictor.window, predictor.overlap)


def evaluate_split(tagger: Tagger, vocab: Vocab, split: datasets.Dataset, batch_size: int = BATCH_SIZE,
                   label_map: dict[str, str] | None = None, task: str | None = None) -> dict[str, Any]:
    """Metrics of the split (the task's, from ``tagger.metrics``) plus tokens/s of prediction (:func:`score_split`)."""
    return score_split(tagger, vocab, split, batch_size, label_map=label_map, task=task).metrics


def evaluate_tasks(tagger: Tagger, vocab: Vocab, splits: dict[str, datasets.Dataset],
                   batch_size: int = BATCH_SIZE) -> dict[str, Any]:
    """A multi-task model scored on one split per task (task name -> its corpus's split): ``{NAME: metrics}`` and,
    when every task has its split, their combination under :data:`tagger.metrics.SELECTION`."""
    results: dict[str, Any] = {name: evaluate_split(tagger, vocab, splits[name], batch_size, task=name)
                               for name in vocab.task_names if name in splits}
    if len(results) == len(vocab.task_names):
        results[SELECTION] = tasks_mean(results, {name: vocab.for_task(name).task for name in vocab.task_names})
    return results


_corpora: dict[str, Any] = {}


def load_corpus(corpus_cfg: dict[str, Any], data_dir: str | None) -> datasets.DatasetDict:
    """A run's corpus as a DatasetDict, rebuilt from its saved config (``data_dir`` overrides where
    the files are); one load per distinct corpus."""
    from hydra.utils import instantiate

    cfg = dict(corpus_cfg) | ({"data_dir": data_dir} if data_dir else {})
    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _corpora:
        _corpora[key] = instantiate(cfg).load()
    return _corpora[key]
