"""Re-evaluation of each run's best checkpoint on the test split, through
:func:`tagger.inference.scoring.score_split` (the prediction and scoring that training and ``tagger evaluate`` use);
cached per checkpoint and version of the prediction code."""
from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tagger.report.sweeps import ReportError, Run

CACHE_VERSION = 2
# the code a cached evaluation depends on: its predictions and its tokens/s are measured again when any of it changes
# (tests/report/test_report.py checks it holds every project module the predictor and the scoring use)
PREDICTION_CODE = ("inference/predictor.py", "inference/word_features.py", "inference/pass_threads.py",
                   "inference/passes.py", "inference/scoring.py", "limits.py", "schemes.py", "metrics.py",
                   "artifacts/checkpoint.py", "data/vocab.py", "data/encoding.py", "models")


@functools.cache
def prediction_code_hash() -> str:
    """sha1 of the sources in :data:`PREDICTION_CODE` (files of a folder in sorted order); read once per process."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1()
    for name in PREDICTION_CODE:
        path = root / name
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def checkpoint_of(run: Run) -> Path | None:
    """The run's best checkpoint (:func:`tagger.artifacts.runs.best_checkpoint`)."""
    from tagger.artifacts.runs import best_checkpoint

    return best_checkpoint(run.path, run.metrics)


def _encode(sents: list[list[str]], index: dict[str, int]) -> list[list[int]]:
    return [[index[t] for t in s] for s in sents]


def decode(ev: dict[str, Any], key: str) -> list[list[str]]:
    labels = ev["labels"]
    return [[labels[i] for i in s] for s in ev[key]]


def unseen_mask(ev: dict[str, Any], kind: str = "unseen") -> list[list[bool]]:
    """Per token: ``unseen`` (not in training), ``unknown`` (not in training nor in the vectors: UNK) or
    ``vector`` (not in training, in the vectors)."""
    unseen = [[c == "1" for c in s] for s in ev["unseen"]]
    if kind == "unseen":
        return unseen
    unknown = [[c == "1" for c in s] for s in ev["unknown"]]
    return unknown if kind == "unknown" else [[u and not k for u, k in zip(us, ks)] for us, ks in zip(unseen, unknown)]


def evaluate_run(run: Run, cache_dir: Path, threads: int, batch_size: int, data_dir: str | None) -> dict[str, Any]:
    """Predict the test split with the run's best checkpoint and saved vocab; cached in ``cache_dir``. One task of a
    multi-task run (``run.model_task``) is predicted by that task's head on that task's corpus.

    Returns {"labels", "gold", "pred" (label ids per sentence), "unseen" ("0"/"1" per token, from the
    model's vocab), "unknown" (likewise: not in the vocabulary at all, so not in the vectors either), "scheme",
    "tokens_per_s", "seconds", "n_tokens", "threads", "loadavg", and for runs trained on short sentences with a learned position table "pred_windowed" (tagged in
    overlapping windows of ``window`` = data.max_train_len tokens)}.
    """
    import torch

    from tagger.artifacts.checkpoint import load_checkpoint
    from tagger.inference.scoring import load_corpus, score_split

    ckpt = checkpoint_of(run)
    if ckpt is None:
        raise ReportError(f"{run.path}: no best checkpoint (metrics.json names {run.metrics.get('best_checkpoint')})")
    stat = ckpt.stat()
    windowed = run.max_train_len is not None and (run.config.get("model") or {}).get("pos_encoding") == "learned"
    key = {"version": CACHE_VERSION, "checkpoint": str(ckpt.resolve()), "mtime_ns": stat.st_mtime_ns,
           "size": stat.st_size, "threads": threads, "batch_size": batch_size, "windowed": windowed,
           "code": prediction_code_hash()}
    name = run.path.name + (f"-{run.model_task}" if run.model_task else "")
    cache = cache_dir / f"{name}-{hashlib.sha1(str(run.path.resolve()).encode()).hexdigest()[:8]}.json.gz"
    if cache.exists():
        try:
            cached = json.loads(gzip.decompress(cache.read_bytes()))
            if cached.get("key") == key:
                return cached
        except (OSError, ValueError):
            pass  # unreadable cache: evaluate again

    loaded = load_checkpoint(ckpt)
    test = load_corpus(run.config["data"]["corpus"], data_dir)["test"]
    torch.set_num_threads(threads)
    # warm-up of 16 sentences: first-call allocations are not inference speed
    scored = score_split(loaded.tagger, loaded.vocab, test, batch_size, warmup=16, task=run.model_task)
    vocab = loaded.vocab.for_task(run.model_task) if run.model_task else loaded.vocab
    labels = sorted({t for s in scored.gold + scored.pred for t in s})
    index = {t: i for i, t in enumerate(labels)}
    ev = {
        "key": key, "labels": labels, "gold": _encode(scored.gold, index), "pred": _encode(scored.pred, index),
        "unseen": ["".join("1" if u else "0" for u in s) for s in scored.unseen],
        "unknown": ["".join("1" if u else "0" for u in s) for s in scored.unknown],
        "scheme": vocab.tag_scheme, "task": vocab.task,
        "tokens_per_s": scored.n_tokens / scored.seconds if scored.seconds else None, "seconds": scored.seconds,
        "n_tokens": scored.n_tokens, "threads": threads, "loadavg": os.getloadavg()[0], "max_len": loaded.tagger.max_len,
    }
    if windowed:  # what a table of only max_train_len rows would force: overlapping windows
        short = score_split(loaded.tagger, loaded.vocab, test, batch_size, window=int(run.max_train_len),
                            task=run.model_task)
        ev |= {"window": short.window, "window_overlap": short.overlap, "pred_windowed": _encode(short.pred, index)}
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(gzip.compress(json.dumps(ev).encode()))
    return ev
