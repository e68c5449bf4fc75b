"""Numbers of the report: mean ± sample std over seeds, their formatting, scores by sentence length."""
from __future__ import annotations

import statistics
from typing import Any, Iterable, Sequence

from tagger.metrics import MAIN_METRIC, task_metrics

Stat = tuple[float | None, float | None]


def mean_std(values: Iterable[float | None]) -> Stat:
    """Mean and sample standard deviation (n-1) of the values that are not None; std is None for n < 2."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def fmt(s: Stat, digits: int = 2, thousands: bool = False) -> str:
    mean, std = s
    if mean is None:
        return "–"
    f = (lambda v: f"{v:,.{digits}f}") if thousands else (lambda v: f"{v:.{digits}f}")
    return f(mean) if std is None else f"{f(mean)} ± {f(std)}"


def fmt_params(values: Iterable[int | None]) -> str:
    """Parameter count: one number when every seed has the same (the usual case)."""
    vals = {v for v in values if v is not None}
    return f"{vals.pop():,}" if len(vals) == 1 else fmt(mean_std(vals), 0, True)


def bucket_edges(edges: Sequence[int], longest: int) -> list[tuple[int, int]]:
    """[(lo, hi)] inclusive length ranges: 1..e1, e1+1..e2, ..., last+1..longest (empty ones dropped)."""
    bounds, lo = [], 1
    for e in sorted(set(edges)):
        if lo > longest:
            break
        bounds.append((lo, min(e, longest)))
        lo = e + 1
    if lo <= longest:
        bounds.append((lo, longest))
    return bounds


def bucket_label(b: tuple[int, int]) -> str:
    return f"{b[0]}–{b[1]}" if b[0] != b[1] else str(b[0])


def bucket_scores(task: str, scheme: str | None, gold: list[list[str]], pred: list[list[str]],
                  buckets: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """The task's main metric on the sentences of each length bucket: [{"score", "n_sent", "n_tok"}]."""
    main = MAIN_METRIC[task]
    out = []
    for lo, hi in buckets:
        idx = [i for i, s in enumerate(gold) if lo <= len(s) <= hi]
        if not idx:
            out.append({"score": None, "n_sent": 0, "n_tok": 0})
            continue
        g, p = [gold[i] for i in idx], [pred[i] for i in idx]
        out.append({"score": task_metrics(task, g, p, None, scheme or "IOB2")[main],
                    "n_sent": len(idx), "n_tok": sum(len(s) for s in g)})
    return out
