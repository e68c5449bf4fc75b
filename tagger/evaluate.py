"""Evaluate a trained tagger on a split (whole sentences, one process); ``python -m tagger.evaluate RUN_DIR`` scores a run again."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import datasets

from tagger.data.encoding import split_docs
from tagger.data.vocab import Vocab
from tagger.inference import Predictor
from tagger.metrics import task_metrics
from tagger.models.tagger import Tagger


@dataclass
class SplitEvaluation:
    """What :func:`score_split` measured: the metrics, and the tags they were computed from."""

    metrics: dict[str, Any]
    gold: list[list[str]]
    pred: list[list[str]]
    unseen: list[list[bool]]  # per token: not in the model's training vocabulary
    seconds: float  # prediction of the whole split, after the warm-up
    n_tokens: int
    window: int  # the predictor's window and overlap (sentences longer than the window are tagged in pieces)
    overlap: int


def score_split(tagger: Tagger, vocab: Vocab, split: datasets.Dataset, batch_size: int = 256,
                window: int | None = None, warmup: int = 0) -> SplitEvaluation:
    """Tag the split with a :class:`~tagger.inference.Predictor` and score it with the task's metrics.

    Sentences are tagged within their documents (the split's ``doc`` column) when the model was trained with
    document context. ``window``: the predictor's window (default: the model's limit). ``warmup``: that many
    sentences are tagged once before the timed pass (first-call allocations are not prediction speed)."""
    names = split.features["tags"].feature.names
    tokens = split["tokens"]
    gold = [[names[t] for t in tags] for tags in split["tags"]]
    predictor = Predictor(tagger, vocab, batch_size=batch_size, window=window)
    if warmup:
        predictor.tags(tokens[:warmup])
    started = time.perf_counter()
    pred = predictor.tags(tokens, split_docs(split))
    seconds = time.perf_counter() - started
    unseen = [[vocab.is_unseen(w) for w in sent] for sent in tokens]
    metrics = task_metrics(vocab.task, gold, pred, unseen, vocab.tag_scheme or "IOB2")
    n = sum(len(s) for s in tokens)
    metrics["predict_tokens_per_s"] = round(n / seconds, 1) if seconds else None
    return SplitEvaluation(metrics, gold, pred, unseen, seconds, n, predictor.window, predictor.overlap)


def evaluate_split(tagger: Tagger, vocab: Vocab, split: datasets.Dataset, batch_size: int = 256) -> dict[str, Any]:
    """Metrics of the split (the task's, from ``tagger.metrics``) plus tokens/s of prediction (:func:`score_split`)."""
    return score_split(tagger, vocab, split, batch_size).metrics


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


def main(argv: list[str] | None = None) -> int:
    """``python -m tagger.evaluate RUN [--data-dir DIR] [--write]``: the run's best checkpoint scored again on its
    corpus's dev and test splits with today's prediction code; ``--write`` puts the new figures into its
    metrics.json (the old main metric kept under ``reevaluated.previous``)."""
    import argparse
    import sys

    from tagger import runs
    from tagger.checkpoint import CheckpointError
    from tagger.fileio import write_json

    parser = argparse.ArgumentParser(prog="python -m tagger.evaluate", description=main.__doc__.split(":")[0])
    parser.add_argument("run", help=f"what to score: {runs.KINDS} (the corpus is the one its metrics name)")
    parser.add_argument("--data-dir", default=None, help="where the corpus files are (default: the run's data_dir)")
    parser.add_argument("--write", action="store_true", help="update the run's metrics.json")
    args = parser.parse_args(argv)
    try:
        source = runs.resolve(args.run)
        metrics = source.metrics
        if not metrics.get("config"):
            raise runs.RunError(f"{args.run}: no metrics.json with the run's config (which corpus to score on)")
        if args.write and source.run_dir is None:
            raise runs.RunError(f"{args.run}: --write needs a run dir whose metrics.json to update")
        loaded = runs.load(source)
    except (OSError, ValueError, KeyError, TypeError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    data = load_corpus(metrics["config"]["data"]["corpus"], args.data_dir)
    main_metric = metrics["main_metric"]
    fresh = {key: evaluate_split(loaded.tagger, loaded.vocab, data[split])
             for split, key in (("validation", "dev"), ("test", "test")) if split in data}
    print(json.dumps({key: round(m[main_metric], 2) for key, m in fresh.items()} | {"metric": main_metric, "run_dir": args.run}))
    if args.write:
        previous = {key: (metrics.get(key) or {}).get(main_metric) for key in fresh}
        metrics |= fresh | {"reevaluated": {"command": " ".join(["python -m tagger.evaluate", *(argv or sys.argv[1:])]),
                                            "previous": previous}}
        write_json(source.run_dir / "metrics.json", metrics)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
