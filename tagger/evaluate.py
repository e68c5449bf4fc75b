"""Evaluate a trained tagger on a split (whole sentences, one process)."""
from __future__ import annotations

import time
from typing import Any

import datasets

from tagger.data.vocab import Vocab
from tagger.inference import Predictor
from tagger.metrics import task_metrics
from tagger.models.tagger import Tagger


def evaluate_split(tagger: Tagger, vocab: Vocab, split: datasets.Dataset, batch_size: int = 256) -> dict[str, Any]:
    """Metrics of the split (the task's, from ``tagger.metrics``) plus tokens/s of prediction.

    Sentences are tagged within their documents (the split's ``doc`` column) when the model was
    trained with document context."""
    names = split.features["tags"].feature.names
    tokens = split["tokens"]
    gold = [[names[t] for t in tags] for tags in split["tags"]]
    predictor = Predictor(tagger, vocab, batch_size=batch_size)
    started = time.perf_counter()
    pred = predictor.tags(tokens, split["doc"] if "doc" in split.column_names else None)
    seconds = time.perf_counter() - started
    unseen = [[vocab.is_unseen(w) for w in sent] for sent in tokens]
    metrics = task_metrics(vocab.task, gold, pred, unseen, vocab.tag_scheme or "IOB2")
    n = sum(len(s) for s in tokens)
    metrics["predict_tokens_per_s"] = round(n / seconds, 1) if seconds else None
    return metrics
