"""Figures of the comparison report (``tagger.report``): plain data in, one PNG out.

Every function takes numbers already aggregated by the report (means and sample standard
deviations over seeds) and writes one figure; none of them reads runs or computes metrics.
A ``(mean, std)`` pair with ``std`` None (a single seed) is drawn without an error bar.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: reports are rendered on servers and in tests

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

Stat = tuple[float | None, float | None]  # (mean, std over seeds; None with one seed)

DPI = 110


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # "tight" keeps a legend placed below the axes
    plt.close(fig)
    return path


def _legend(ax: plt.Axes, n: int, loc: str = "best") -> None:
    """A few series: inside the axes (``loc``; "outside" = right of the axes, never over a bar);
    many: below the axes in two columns."""
    if n <= 4 and loc == "outside":
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif n <= 4:
        ax.legend(fontsize=8, loc=loc)
    else:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)


def _wrap(label: str, width: int = 48) -> str:
    """Variant names can be long (every differing config value); wrap them for legends and axes."""
    return textwrap.fill(label, width, break_long_words=False)


def _split(stats: Sequence[Stat]) -> tuple[np.ndarray, np.ndarray]:
    mean = np.array([np.nan if m is None else m for m, _ in stats], dtype=float)
    std = np.array([0.0 if s is None else s for _, s in stats], dtype=float)
    return mean, std


def grouped_bars(categories: Sequence[str], series: dict[str, Sequence[Stat]], ylabel: str, title: str,
                 path: Path, ylim: tuple[float, float] | None = None, horizontal_labels: bool = False) -> Path:
    """One group of bars per category, one bar per series, error bars = std over seeds."""
    n_series = max(1, len(series))
    width = 0.8 / n_series
    x = np.arange(len(categories))
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.45 * len(categories) * n_series + 2.5)), 4.2))
    for i, (label, stats) in enumerate(series.items()):
        mean, std = _split(stats)
        ax.bar(x + (i - (n_series - 1) / 2) * width, mean, width, yerr=std, capsize=2, label=_wrap(label))
    ax.set_xticks(x, categories, rotation=0 if horizontal_labels else 45, ha="center" if horizontal_labels else "right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(*(ylim or (0.0, None)))
    ax.grid(axis="y", alpha=0.3)
    _legend(ax, n_series, "outside")
    return _save(fig, path)


def hbars(labels: Sequence[str], series: dict[str, Sequence[Stat]], xlabel: str, title: str, path: Path) -> Path:
    """Horizontal bars, one row per label (long variant names), one bar per series."""
    n_series = max(1, len(series))
    height = 0.8 / n_series
    y = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(9.0, 0.5 * len(labels) * n_series + 1.6))
    lo = []
    for i, (name, stats) in enumerate(series.items()):
        mean, std = _split(stats)
        ax.barh(y + (i - (n_series - 1) / 2) * height, mean, height, xerr=std, capsize=2, label=name)
        lo.append(np.nanmin(mean - std) if np.isfinite(mean).any() else 0.0)
    ax.set_yticks(y, [_wrap(lb) for lb in labels], fontsize=8)
    ax.invert_yaxis()
    # bars of 90-something % are indistinguishable from 0; start the axis near the smallest value
    finite = [v for v in lo if np.isfinite(v)]
    if finite:
        ax.set_xlim(left=max(0.0, min(finite) - 2.0))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, n_series, "outside")
    return _save(fig, path)


def lines_by_bucket(buckets: Sequence[str], series: dict[str, Sequence[Stat]], ylabel: str, title: str, path: Path,
                    counts: Sequence[int] | None = None, vline_after: int | None = None,
                    vline_label: str | None = None) -> Path:
    """Metric per length bucket, one line per series; ``counts`` are written under the bucket names;
    ``vline_after`` draws a dashed line after that bucket index (e.g. the training length limit)."""
    x = np.arange(len(buckets))
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(buckets) + 2.5), 4.2))
    for label, stats in series.items():
        mean, std = _split(stats)
        ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=_wrap(label))
    names = [f"{b}\n({c} tok)" for b, c in zip(buckets, counts)] if counts else list(buckets)
    ax.set_xticks(x, names, fontsize=8)
    ax.set_xlabel("sentence length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if vline_after is not None:
        ax.axvline(vline_after + 0.5, color="grey", linestyle="--", linewidth=1)
        if vline_label:
            ax.text(vline_after + 0.55, ax.get_ylim()[0], vline_label, fontsize=8, color="grey", va="bottom")
    ax.grid(alpha=0.3)
    _legend(ax, len(series))
    return _save(fig, path)


def learning_curves(series: dict[str, dict[str, list[float]]], ylabel: str, path: Path) -> Path:
    """Two panels: dev metric vs epoch and vs wall time. ``series[label]`` has lists ``epoch``,
    ``mean``, ``std`` (0 with one seed) and ``seconds`` (mean elapsed fit time at that epoch)."""
    fig, (ax_e, ax_t) = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for label, s in series.items():
        mean, std = np.array(s["mean"]), np.array(s["std"])
        for ax, x in ((ax_e, np.array(s["epoch"])), (ax_t, np.array(s["seconds"]) / 60.0)):
            (line,) = ax.plot(x, mean, marker=".", label=_wrap(label))
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    ax_e.set_xlabel("epoch")
    ax_t.set_xlabel("wall time of fit (minutes, estimated per epoch)")
    ax_e.set_ylabel(ylabel)
    ax_e.set_title(f"{ylabel} vs epoch")
    ax_t.set_title(f"{ylabel} vs wall time")
    for ax in (ax_e, ax_t):
        ax.grid(alpha=0.3)
    if len(series) <= 4:
        ax_e.legend(fontsize=8, loc="lower right")
    else:
        fig.legend(*ax_e.get_legend_handles_labels(), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=2, frameon=False)
    return _save(fig, path)


def attention_heads(tokens: Sequence[str], weights: Sequence[Sequence[Sequence[float]]], title: str, path: Path) -> Path:
    """Heat maps of one layer's attention, one panel per head. ``weights`` is [head][query][key]."""
    heads, T = len(weights), len(tokens)
    cols = min(heads, 4)
    rows = (heads + cols - 1) // cols
    side = max(3.2, 0.22 * T + 1.2)
    fig, axes = plt.subplots(rows, cols, figsize=(side * cols, side * rows + 0.6), squeeze=False)
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        im = ax.imshow(np.array(weights[h]), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(T), tokens, fontsize=7)
        ax.set_xlabel("key (attended to)", fontsize=8)
        if h % cols == 0:
            ax.set_ylabel("query", fontsize=8)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path
