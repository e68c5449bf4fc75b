"""Comparison reports: ``python -m tagger.report RUN_DIR... --out reports/NAME``.

Reads the run dirs written by ``tagger.train`` (or sweep dirs, searched recursively), groups the
runs into variants (model name + the config values that differ between runs of that model),
aggregates seeds (mean ± sample std), re-evaluates every best checkpoint once on the test split
(inference speed, accuracy by sentence length, seen vs unseen words, attention maps, length
extrapolation) and writes ``report.md``, a self-contained ``report.html``, the PNG figures and
``best.json`` (the best run by the *dev* metric, for packaging).

Nothing is dropped silently: a run dir without ``metrics.json`` (failed, killed or still running)
and a sweep job that never started are listed in the report with their overrides.

Reads straight down: find runs -> label variants -> re-evaluate -> build the document -> write.
"""
from __future__ import annotations

import argparse
import base64
import csv
import gzip
import hashlib
import html
import itertools
import json
import os
import re
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # corpora are local files; never reach for the Hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import yaml  # noqa: E402

from tagger.metrics import MAIN_METRIC, task_metrics, token_accuracy  # noqa: E402

METRIC_TEXT = {
    "acc": "token accuracy (%)",
    "f1": "entity F1 (%, exact span and type, seqeval strict mode)",
}
DEFAULT_EDGES = (10, 20, 30, 40, 60)  # length buckets 1-10, 11-20, 21-30, 31-40, 41-60, 61-longest
MODEL_ORDER = ("window_fc", "bilstm", "self_attention", "self_attention_ner")  # lecture order: window, RNN, attention
ABLATION_FACTORS = ("pos_encoding", "pos_combine", "score", "window")
CACHE_VERSION = 1
# config keys that differ between runs without making them different models
_NOT_VARIANT = ("seed", "data.seed", "output_dir", "ckpt_path", "data_dir", "data.corpus.data_dir", "ablation")
_NAMED_GROUPS = {"model": "model_name", "head": "head_name", "data": "data_name"}


class ReportError(RuntimeError):
    """The report cannot be made from these run dirs (named in the message)."""


# --------------------------------------------------------------------------- #
# Runs and sweeps on disk
# --------------------------------------------------------------------------- #


@dataclass
class Run:
    path: Path
    metrics: dict[str, Any] | None  # metrics.json; None when the run has no results
    overrides: list[str]  # .hydra/overrides.yaml: the command-line overrides of the job
    problem: str | None = None  # why it has no results
    variant: str = ""
    evaluation: dict[str, Any] | None = None  # re-evaluation of the test split (see evaluate_run)
    eval_problem: str | None = None
    model_choice: str | None = None  # .hydra/hydra.yaml: the model config chosen (names runs without results)

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def main_metric(self) -> str:
        return self.metrics["main_metric"]

    @property
    def config(self) -> dict[str, Any]:
        return self.metrics.get("config") or {}

    @property
    def max_train_len(self) -> int | None:
        return (self.config.get("data") or {}).get("max_train_len")

    @property
    def seed(self) -> int | str:
        if self.metrics and "seed" in self.metrics:
            return self.metrics["seed"]
        return next((o.split("=", 1)[1] for o in self.overrides if o.lstrip("+").startswith("seed=")), "?")

    def score(self, split: str) -> float | None:
        return (self.metrics.get(split) or {}).get(self.main_metric)

    def identity(self) -> frozenset[str]:
        """The job's overrides without the seed: runs of one variant share it."""
        return _identity(self.overrides)


def _identity(overrides: Iterable[str]) -> frozenset[str]:
    return frozenset(o for o in overrides if not o.lstrip("+~").startswith("seed="))


@dataclass
class Sweep:
    path: Path
    command: str
    params: dict[str, str]
    expected: list[list[str]] | None  # override sets of every job (basic sweeper), else None
    n_trials: int | None = None
    model_choice: str | None = None  # the model config of the sweep when it does not sweep models


def _last_lines(path: Path, n: int = 200) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _failure_reason(d: Path) -> str:
    """What a run dir without metrics.json tells about why."""
    parts = ["no metrics.json (failed, killed or still running)"]
    epochs = len(read_curve(d / "csv" / "metrics.csv", None))
    if epochs:
        parts.append(f"{epochs} validation epoch(s) logged")
    if (d / "checkpoints" / "last.ckpt").exists():
        parts.append("last.ckpt present")
    logs = [p for p in (d / "train.log", d / "csv" / "metrics.csv") if p.exists()]
    if logs:
        age = time.time() - max(p.stat().st_mtime for p in logs)
        if age < 600:
            parts.append(f"log written {age:.0f} s ago: probably still running")
    errors = [ln for ln in _last_lines(d / "train.log") if re.search(r"Error|Exception|Traceback|Killed", ln)]
    if errors:
        parts.append(f"train.log: {errors[-1].strip()[:200]}")
    return "; ".join(parts)


def _model_choice(hydra_cfg: dict[str, Any]) -> str | None:
    return ((hydra_cfg.get("runtime") or {}).get("choices") or {}).get("model")


def load_run(d: Path) -> Run:
    ov_path = d / ".hydra" / "overrides.yaml"
    overrides = [str(o) for o in (yaml.safe_load(ov_path.read_text()) or [])] if ov_path.exists() else []
    m_path = d / "metrics.json"
    if not m_path.exists():
        hydra_yaml = d / ".hydra" / "hydra.yaml"
        choice = _model_choice((yaml.safe_load(hydra_yaml.read_text()) or {}).get("hydra", {})) if hydra_yaml.exists() else None
        return Run(d, None, overrides, _failure_reason(d), model_choice=choice)
    try:
        metrics = json.loads(m_path.read_text())
    except json.JSONDecodeError as e:
        return Run(d, None, overrides, f"metrics.json unreadable: {e}")
    run = Run(d, metrics, overrides)
    if run.score("dev") is None:
        run.problem = "metrics.json has no dev metrics (trained with evaluate=false?)"
    return run


def load_sweep(d: Path) -> Sweep:
    """The sweep command and, for Hydra's basic sweeper, every job it was to launch."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra_cfg = (yaml.safe_load((d / "multirun.yaml").read_text()) or {}).get("hydra", {})
    task = [str(o) for o in hydra_cfg.get("overrides", {}).get("task", [])]
    sweeper = hydra_cfg.get("sweeper") or {}
    params = {str(k): str(v) for k, v in (sweeper.get("params") or {}).items()}
    command = " ".join(["python -m tagger.train -m", *map(shlex.quote, task)])
    model = _model_choice(hydra_cfg)
    if "BasicSweeper" not in str(sweeper.get("_target_", "")):
        return Sweep(d, command, params, None, sweeper.get("n_trials"), model)
    try:
        # command-line overrides come last: they replace the config's sweeper params of the same key
        parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + task)
    except Exception:  # an override the parser cannot read: no expectation, nothing flagged missing
        return Sweep(d, command, params, None, model_choice=model)
    axes: dict[str, list[str]] = {}
    for o in parsed:
        key = o.get_key_element()
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[key] = [f"{key}={v}" for v in values]
    return Sweep(d, command, params, [list(c) for c in itertools.product(*axes.values())], model_choice=model)


def find_runs(paths: Sequence[Path]) -> tuple[list[Run], list[Sweep]]:
    """Run dirs (``metrics.json`` or ``.hydra/config.yaml``) and sweep dirs (``multirun.yaml``) under
    ``paths``. A path that does not exist is an error; one holding no run is reported, not skipped."""
    runs: dict[Path, Run] = {}
    sweeps: dict[Path, Sweep] = {}
    for root in paths:
        if not root.exists():
            raise ReportError(f"{root}: no such run or sweep dir")
        for dirpath, dirnames, filenames in os.walk(root):
            d = Path(dirpath)
            if "multirun.yaml" in filenames and d.resolve() not in sweeps:
                sweeps[d.resolve()] = load_sweep(d)
            if "metrics.json" in filenames or (d / ".hydra" / "config.yaml").is_file():
                if d.resolve() not in runs:
                    runs[d.resolve()] = load_run(d)
                dirnames[:] = []  # checkpoints/, csv/ and .hydra/ hold no runs
            else:
                dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
    return sorted(runs.values(), key=lambda r: str(r.path)), sorted(sweeps.values(), key=lambda s: str(s.path))


def missing_jobs(runs: Sequence[Run], sweeps: Sequence[Sweep]) -> list[tuple[Sweep, list[str]]]:
    """Sweep jobs (basic sweeper) with no run dir at all: the sweep stopped before them."""
    missing = []
    for sweep in sweeps:
        inside = [set(r.overrides) for r in runs if sweep.path.resolve() in r.path.resolve().parents]
        for combo in sweep.expected or []:
            if not any(set(combo) <= ov for ov in inside):
                missing.append((sweep, combo))
    return missing


def read_curve(path: Path, metric: str | None) -> list[tuple[int, int, float]]:
    """(epoch, step, dev value) per validation epoch from Lightning's CSV log; the last row of an
    epoch wins (a resumed run logs it again). ``metric`` None: the first ``val/`` column found."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    column = f"val/{metric}" if metric else next((c for c in rows[0] if c.startswith("val/")), None)
    by_epoch: dict[int, tuple[int, int, float]] = {}
    for row in rows:
        value, epoch = row.get(column or "", ""), row.get("epoch", "")
        if value not in ("", None) and epoch not in ("", None):
            e = int(float(epoch))
            by_epoch[e] = (e, int(float(row.get("step") or 0)), float(value))
    return [by_epoch[e] for e in sorted(by_epoch)]


# --------------------------------------------------------------------------- #
# Variants: model name + the config values that differ between runs of that model
# --------------------------------------------------------------------------- #


def _flatten(d: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(d, dict):
        out: dict[str, str] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d if isinstance(d, str) else json.dumps(d)}


def _varying_config(run: Run) -> dict[str, str]:
    flat = _flatten(run.config)
    out_dir = str(run.config.get("output_dir") or run.path)
    return {k: v for k, v in flat.items()
            if not any(k == p or k.startswith(p + ".") for p in _NOT_VARIANT) and out_dir not in v}


def _short(key: str) -> str:
    if key in _NAMED_GROUPS.values():
        return key.removesuffix("_name")
    return key.removeprefix("model.")


def _label_value(v: str) -> str:
    """Sampled floats (Optuna) shortened to 4 significant digits."""
    return f"{float(v):.4g}" if re.fullmatch(r"-?\d+\.\d{5,}", v) else v


def assign_variants(runs: Sequence[Run]) -> None:
    """Label every run. Completed runs: model name + ``key=value`` for each config value that differs
    between completed runs of that model (keys of a group chosen by name, e.g. ``head.*``, only count
    when they differ between runs with the same choice). Runs without results take the label of
    completed runs with the same overrides (seed aside), else a label from their overrides."""
    ok = [r for r in runs if r.ok]
    flats = {id(r): _varying_config(r) for r in ok}
    by_model: dict[str, list[Run]] = {}
    for r in ok:
        by_model.setdefault(str(r.metrics.get("model")), []).append(r)
    for name, group in by_model.items():
        keys = sorted({k for r in group for k in flats[id(r)]})
        varying = []
        for k in keys:
            named = _NAMED_GROUPS.get(k.split(".")[0]) if "." in k else None
            # head.constrain differs between softmax and crf runs only because head_name does
            subsets: dict[str, set[str | None]] = {}
            for r in group:
                subsets.setdefault(flats[id(r)].get(named, "") if named else "", set()).add(flats[id(r)].get(k))
            if any(len(v) > 1 for v in subsets.values()):
                varying.append(k)
        for r in group:
            extra = " ".join(f"{_short(k)}={_label_value(flats[id(r)].get(k, 'unset'))}" for k in varying)
            r.variant = f"{name} {extra}".strip()
    labels = {r.identity(): r.variant for r in ok}
    for r in runs:
        if not r.ok:
            r.variant = label_without_results(r.overrides, labels, r.model_choice)


def label_without_results(overrides: Iterable[str], labels: dict[frozenset[str], str],
                          model_choice: str | None = None) -> str:
    """The variant of a run that has no results: that of completed runs with the same overrides (seed
    aside), else the model name and the overrides that set it apart."""
    ident = _identity(overrides)
    if ident in labels:
        return labels[ident]
    model = next((o.split("=", 1)[1] for o in ident if o.startswith("model=")), model_choice or "?")
    rest = sorted(o for o in ident if not o.startswith(("model=", "experiment=")))
    return f"{model} [{' '.join(rest)}]" if rest else model


@dataclass
class Group:
    variant: str
    runs: list[Run] = field(default_factory=list)  # completed
    failed: list[Run] = field(default_factory=list)  # run dirs without results
    missing: list[list[str]] = field(default_factory=list)  # sweep jobs never started

    @property
    def model(self) -> str:
        return self.variant.split(" ", 1)[0]

    @property
    def n_planned(self) -> int:
        return len(self.runs) + len(self.failed) + len(self.missing)


def make_groups(runs: Sequence[Run], missing: Sequence[tuple[Sweep, list[str]]]) -> list[Group]:
    groups: dict[str, Group] = {}
    for r in runs:
        g = groups.setdefault(r.variant, Group(r.variant))
        (g.runs if r.ok else g.failed).append(r)
    labels = {r.identity(): r.variant for r in runs if r.ok}
    for sweep, combo in missing:
        variant = label_without_results(combo, labels, sweep.model_choice)
        groups.setdefault(variant, Group(variant)).missing.append(combo)

    def order(g: Group) -> tuple:
        m = g.model
        return (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m, not g.runs, g.variant)

    return sorted(groups.values(), key=order)


# --------------------------------------------------------------------------- #
# Statistics
# --------------------------------------------------------------------------- #

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


def best_run(runs: Sequence[Run]) -> Run | None:
    """The completed run with the highest dev main metric; ties go to the first path (sorted).
    Test metrics play no part: choosing by test would leak the test set into model selection."""
    ok = sorted((r for r in runs if r.ok), key=lambda r: str(r.path))
    return max(ok, key=lambda r: r.score("dev"), default=None)


# --------------------------------------------------------------------------- #
# Re-evaluation of the best checkpoints on the test split (cached)
# --------------------------------------------------------------------------- #

_corpora: dict[str, Any] = {}


def load_corpus(corpus_cfg: dict[str, Any], data_dir: str | None) -> Any:
    """The run's corpus as a DatasetDict, rebuilt from its config (``data_dir`` overrides where
    the files are); one load per distinct corpus."""
    from hydra.utils import instantiate

    cfg = dict(corpus_cfg) | ({"data_dir": data_dir} if data_dir else {})
    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _corpora:
        _corpora[key] = instantiate(cfg).load()
    return _corpora[key]


def checkpoint_of(run: Run) -> Path | None:
    """The run's best checkpoint (:func:`tagger.runs.best_checkpoint`)."""
    from tagger.runs import best_checkpoint

    return best_checkpoint(run.path, run.metrics)


def _encode(sents: list[list[str]], index: dict[str, int]) -> list[list[int]]:
    return [[index[t] for t in s] for s in sents]


def decode(ev: dict[str, Any], key: str) -> list[list[str]]:
    labels = ev["labels"]
    return [[labels[i] for i in s] for s in ev[key]]


def unseen_mask(ev: dict[str, Any]) -> list[list[bool]]:
    return [[c == "1" for c in s] for s in ev["unseen"]]


def evaluate_run(run: Run, cache_dir: Path, threads: int, batch_size: int, data_dir: str | None) -> dict[str, Any]:
    """Predict the test split with the run's best checkpoint and saved vocab; cached in ``cache_dir``.

    Returns {"labels", "gold", "pred" (label ids per sentence), "unseen" ("0"/"1" per token, from the
    model's vocab), "scheme", "tokens_per_s", "seconds", "n_tokens", "threads", "loadavg", and for
    runs trained on short sentences with a learned position table "pred_windowed" (tagged in
    overlapping windows of ``window`` = data.max_train_len tokens)}.
    """
    import torch

    from tagger.checkpoint import load_checkpoint
    from tagger.data.encoding import split_docs
    from tagger.inference import Predictor

    ckpt = checkpoint_of(run)
    if ckpt is None:
        raise ReportError(f"{run.path}: no best checkpoint (metrics.json names {run.metrics.get('best_checkpoint')})")
    stat = ckpt.stat()
    windowed = run.max_train_len is not None and (run.config.get("model") or {}).get("pos_encoding") == "learned"
    key = {"version": CACHE_VERSION, "checkpoint": str(ckpt.resolve()), "mtime_ns": stat.st_mtime_ns,
           "size": stat.st_size, "threads": threads, "batch_size": batch_size, "windowed": windowed}
    cache = cache_dir / f"{run.path.name}-{hashlib.sha1(str(run.path.resolve()).encode()).hexdigest()[:8]}.json.gz"
    if cache.exists():
        try:
            cached = json.loads(gzip.decompress(cache.read_bytes()))
            if cached.get("key") == key:
                return cached
        except (OSError, ValueError):
            pass  # unreadable cache: evaluate again

    loaded = load_checkpoint(ckpt)
    test = load_corpus(run.config["data"]["corpus"], data_dir)["test"]
    names = test.features["tags"].feature.names
    tokens = test["tokens"]
    gold = [[names[t] for t in tags] for tags in test["tags"]]
    torch.set_num_threads(threads)
    predictor = Predictor(loaded.tagger, loaded.vocab, batch_size=batch_size)
    predictor.tags(tokens[:16])  # warm-up: first-call allocations are not inference speed
    started = time.perf_counter()
    pred = predictor.tags(tokens, split_docs(test))  # documents matter to models trained with document context
    seconds = time.perf_counter() - started
    n_tokens = sum(len(s) for s in tokens)
    labels = sorted({t for s in gold + pred for t in s})
    index = {t: i for i, t in enumerate(labels)}
    ev = {
        "key": key, "labels": labels, "gold": _encode(gold, index), "pred": _encode(pred, index),
        "unseen": ["".join("1" if loaded.vocab.is_unseen(w) else "0" for w in s) for s in tokens],
        "scheme": loaded.vocab.tag_scheme, "task": loaded.vocab.task,
        "tokens_per_s": n_tokens / seconds if seconds else None, "seconds": seconds, "n_tokens": n_tokens,
        "threads": threads, "loadavg": os.getloadavg()[0], "max_len": loaded.tagger.max_len,
    }
    if windowed:  # what a table of only max_train_len rows would force: overlapping windows
        short = Predictor(loaded.tagger, loaded.vocab, batch_size, window=int(run.max_train_len))
        ev |= {"window": short.window, "window_overlap": short.overlap, "pred_windowed": _encode(short.tags(tokens), index)}
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(gzip.compress(json.dumps(ev).encode()))
    return ev


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


# --------------------------------------------------------------------------- #
# The document: blocks rendered to markdown and to self-contained HTML
# --------------------------------------------------------------------------- #


class Doc:
    """Headings, paragraphs, tables and figures, rendered twice: ``report.md`` (figures linked) and
    ``report.html`` (figures embedded as base64 PNG, so the file stands alone)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(("ul", list(items)))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> None:
        self.blocks.append(("table", ([str(h) for h in header], [[str(c) for c in r] for r in rows], caption)))

    def figure(self, path: Path, caption: str) -> None:
        self.blocks.append(("figure", (path, caption)))

    def markdown(self) -> str:
        out = []
        for kind, v in self.blocks:
            if kind == "h":
                out.append(f"{'#' * v[0]} {v[1]}")
            elif kind == "p":
                out.append(v)
            elif kind == "ul":
                out.append("\n".join(f"- {i}" for i in v))
            elif kind == "code":
                out.append(f"```\n{v}\n```")
            elif kind == "table":
                header, rows, caption = v
                cell = lambda c: c.replace("|", "\\|").replace("\n", " ")  # noqa: E731
                lines = [f"*{caption}*", "", "| " + " | ".join(map(cell, header)) + " |",
                         "|" + "|".join("---" for _ in header) + "|"]
                lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
                out.append("\n".join(lines))
            elif kind == "figure":
                path, caption = v
                out.append(f"![{path.stem}]({path.name})\n\n*{caption}*")
        return "\n\n".join(out) + "\n"

    def html(self, title: str) -> str:
        body = []
        for kind, v in self.blocks:
            if kind == "h":
                body.append(f"<h{v[0]}>{_inline(v[1])}</h{v[0]}>")
            elif kind == "p":
                body.append(f"<p>{_inline(v)}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in v) + "</ul>")
            elif kind == "code":
                body.append(f"<pre><code>{html.escape(v)}</code></pre>")
            elif kind == "table":
                header, rows, caption = v
                head = "".join(f"<th>{_inline(c)}</th>" for c in header)
                trs = "".join("<tr>" + "".join(_td(c) for c in r) + "</tr>" for r in rows)
                # the caption as a paragraph: a <caption> is squeezed to the width of a narrow table
                body.append(f'<p class="caption">{_inline(caption)}</p>'
                            f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table></div>')
            elif kind == "figure":
                path, caption = v
                data = base64.b64encode(path.read_bytes()).decode()
                body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(path.stem)}">'
                            f"<figcaption>{_inline(caption)}</figcaption></figure>")
        return _HTML.format(title=html.escape(title), body="\n".join(body))


def _inline(text: str) -> str:
    """Escape, then the markdown inline forms the report uses: `code`, **bold** and *italic*."""
    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
    return re.sub(r"(?<![*\w])\*([^*\s][^*]*)\*(?![*\w])", r"<em>\1</em>", s)


_NUMBER = re.compile(r"^[-+]?[\d,.]+( ± [\d,.]+)?$|^–$")


def _td(cell: str) -> str:
    """A table cell; numbers (``92.10 ± 0.31``) never wrap."""
    return f'<td class="num">{_inline(cell)}</td>' if _NUMBER.match(cell) else f"<td>{_inline(cell)}</td>"


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0 0 1em 0; font-size: 0.9em; }}
p.caption {{ font-style: italic; font-size: 0.9em; margin: 1.2em 0 0.3em 0; }}
div.wide {{ overflow-x: auto; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
td.num {{ white-space: nowrap; }}
td code {{ overflow-wrap: break-word; }}
th {{ background: #f3f3f3; }}
tbody tr:nth-child(even) {{ background: #fafafa; }}
figure {{ margin: 1.5em 0; }}
figure img {{ max-width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-style: italic; font-size: 0.9em; margin-top: 0.4em; }}
code {{ background: #f3f3f3; padding: 0 0.2em; }}
pre {{ background: #f3f3f3; padding: 0.6em; overflow-x: auto; }}
</style></head>
<body>
{body}
</body></html>
"""


# --------------------------------------------------------------------------- #
# Report sections
# --------------------------------------------------------------------------- #


@dataclass
class Context:
    runs: list[Run]
    groups: list[Group]
    sweeps: list[Sweep]
    missing: list[tuple[Sweep, list[str]]]
    task: str
    metric: str
    out: Path
    args: argparse.Namespace
    doc: Doc = field(default_factory=Doc)
    figures: list[Path] = field(default_factory=list)

    @property
    def done(self) -> list[Group]:
        return [g for g in self.groups if g.runs]

    def fig(self, name: str) -> Path:
        path = self.out / name
        self.figures.append(path)
        return path

    def buckets(self, runs: Sequence[Run] | None = None, extra_edges: Sequence[int] = ()) -> list[tuple[int, int]]:
        """Length buckets up to the longest test sentence, without the empty ones."""
        lengths = {len(s) for r in (runs or self.runs) if r.evaluation for s in r.evaluation["gold"]}
        edges = sorted(set(self.args.edges) | set(extra_edges))
        return [b for b in bucket_edges(edges, max(lengths, default=0)) if any(b[0] <= n <= b[1] for n in lengths)]


def _task_of(runs: Sequence[Run]) -> str:
    tasks = sorted({r.metrics["task"] for r in runs if r.ok})
    if len(tasks) > 1:
        raise ReportError(f"runs of different tasks ({', '.join(tasks)}) cannot share one report; "
                          "make one report per task")
    if not tasks:
        raise ReportError("no completed run (no metrics.json with dev metrics) among the paths given")
    return tasks[0]


def section_summary(c: Context, best: Run | None) -> None:
    d, data = c.doc, sorted({str(r.metrics.get("data")) for r in c.runs if r.ok})
    d.h(1, c.args.title or f"{c.task.upper()} comparison on {', '.join(data)}")
    n_ok = sum(r.ok for r in c.runs)
    n_failed = len(c.runs) - n_ok
    d.p(f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `{c.args.command}`. "
        f"{n_ok} completed run(s), {n_failed} run dir(s) without results, {len(c.missing)} sweep job(s) never started. "
        f"Main metric: **{c.metric}** = {METRIC_TEXT[c.metric]}. "
        "Mean ± sample standard deviation (n−1) over seeds; n = completed seeds.")
    if best is not None:
        d.p(f"**Best model by the dev {c.metric}: `{best.variant}`** (seed {best.seed}, "
            f"dev {best.score('dev'):.2f}, test {_num(best.score('test'))}) — `{best.path}`; written to `best.json`. "
            "Test numbers were not used to choose it.")
    problems = [f"`{r.path}` ({r.variant}): {r.problem}; overrides `{' '.join(r.overrides) or '(none)'}`"
                for r in c.runs if not r.ok]
    problems += [f"never started: `{' '.join(combo)}` (sweep `{s.path}`)" for s, combo in c.missing]
    if problems:
        d.h(2, "Runs without results")
        d.p("Listed, not dropped: these runs are missing from the means below (the *runs* column counts them).")
        d.bullets(problems)
    not_evaluated = [f"`{r.path}`: {r.eval_problem}" for r in c.runs if r.eval_problem]
    if not_evaluated:
        d.p("Re-evaluation failed for these runs: their metrics.json numbers are used, but they are missing from "
            "inference speed, length buckets and attention maps:")
        d.bullets(not_evaluated)


def _num(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def section_main(c: Context) -> None:
    d, m = c.doc, c.metric
    d.h(2, "1. Main results")
    rows = []
    for g in c.groups:
        rs = g.runs
        ev = [r.evaluation["tokens_per_s"] if r.evaluation else None for r in rs]
        rows.append([
            f"`{g.variant}`", f"{len(rs)}/{g.n_planned}",
            fmt(mean_std(r.score("dev") for r in rs)), fmt(mean_std(r.score("test") for r in rs)),
            fmt_params(r.metrics.get("params") for r in rs),
            fmt(mean_std(r.metrics.get("epochs") for r in rs), 1), fmt(mean_std(r.metrics.get("best_epoch") for r in rs), 1),
            fmt(mean_std(r.metrics.get("fit_seconds") for r in rs), 0, True),
            fmt(mean_std(r.metrics.get("train_tokens_per_s") for r in rs), 0, True),
            fmt(mean_std(ev), 0, True),
        ])
    threads = sorted({str(r.metrics.get("threads")) for r in c.runs if r.ok})
    d.table(["variant", "runs (done/planned)", f"dev {m}", f"test {m}", "params", "epochs", "best epoch",
             "fit wall time (s)", "train tokens/s", "inference tokens/s"], rows,
            f"Dev and test {METRIC_TEXT[m]} of the best checkpoint (by dev) of each run, from metrics.json. "
            "Fit wall time: Lightning fit incl. validation; train tokens/s: training tokens / time spent in training "
            f"batches, with {', '.join(threads)} thread(s) as trained. Inference tokens/s: measured by this report "
            + (f"predicting the whole test split once (batch {c.args.batch_size}, after a warm-up) with "
               f"torch.set_num_threads({c.args.threads}); load average at measurement "
               f"{_loadavg(c)} — other jobs on the machine slow it down."
               if not c.args.no_eval else "— not measured (--no-eval)."))
    stats = [(mean_std(r.score("dev") for r in g.runs), mean_std(r.score("test") for r in g.runs)) for g in c.done]
    if stats:
        from tagger.report_plots import hbars

        path = hbars([g.variant for g in c.done], {"dev": [s[0] for s in stats], "test": [s[1] for s in stats]},
                     METRIC_TEXT[m], f"dev and test {m} per variant", c.fig("main.png"))
        d.figure(path, f"Dev and test {METRIC_TEXT[m]} per variant (bars: mean over seeds; whiskers: ± std). "
                       "The axis starts near the lowest value to make differences visible.")
    mismatch = [r for r in c.runs if r.evaluation and r.score("test") is not None
                and abs(_score(c, r.evaluation, "pred") - r.score("test")) > 0.01]
    if mismatch:
        d.p("Note: the report's re-evaluation of the test split differs from metrics.json for "
            + ", ".join(f"`{r.path}` ({_score(c, r.evaluation, 'pred'):.2f} vs {r.score('test'):.2f})" for r in mismatch)
            + " — the corpus files may have changed since training.")


def _loadavg(c: Context) -> str:
    loads = [r.evaluation["loadavg"] for r in c.runs if r.evaluation]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–"


def _score(c: Context, ev: dict[str, Any], key: str) -> float:
    return task_metrics(c.task, decode(ev, "gold"), decode(ev, key), None, ev["scheme"] or "IOB2")[c.metric]


def section_per_label(c: Context) -> None:
    from tagger.report_plots import grouped_bars

    d = c.doc
    pos = c.task == "pos"
    d.h(2, "2. Per-tag accuracy" if pos else "2. Per-type precision, recall and F1")
    key = "per_tag" if pos else "per_type"
    support: dict[str, int] = {}
    for g in c.done:
        for r in g.runs:
            for t, v in ((r.metrics.get("test") or {}).get(key) or {}).items():
                support.setdefault(t, v.get("support") or 0)
    labels = sorted(support, key=lambda t: (-support[t], t))

    def stat(g: Group, t: str, f: str) -> Stat:
        return mean_std(((r.metrics.get("test") or {}).get(key, {}).get(t) or {}).get(f) for r in g.runs)

    fields = ["acc"] if pos else ["precision", "recall", "f1"]
    header = ["tag" if pos else "type", "test support"] + [
        f"`{g.variant}`" + ("" if pos else f" {f[0].upper()}") for g in c.done for f in fields]
    rows = [[t, support[t]] + [fmt(stat(g, t, f), 1) for g in c.done for f in fields] for t in labels]
    d.table(header, rows,
            ("Test accuracy (%) on the tokens of each gold tag (recall of the tag)" if pos else
             "Test precision / recall / F1 (%) per entity type, strict exact-span matching; support = gold entities")
            + ", mean ± std over seeds, from metrics.json; sorted by support.")
    if labels:
        f = "acc" if pos else "f1"
        path = grouped_bars(labels, {g.variant: [stat(g, t, f) for t in labels] for g in c.done},
                            f"test {f} (%)", f"test {'accuracy per tag' if pos else 'F1 per entity type'}",
                            c.fig("per_tag.png" if pos else "per_type.png"), horizontal_labels=not pos)
        d.figure(path, f"Test {'accuracy per gold tag' if pos else 'F1 per entity type'} per variant "
                       "(mean over seeds, whiskers ± std), tags ordered by test support.")


def section_length_unseen(c: Context) -> None:
    from tagger.report_plots import grouped_bars, lines_by_bucket

    d, m = c.doc, c.metric
    d.h(2, "3. Sentence length and unseen words")
    d.p("The lecture's claim: a window model sees only its neighbours, an RNN carries far context but forgets it, "
        "self-attention sees the whole sentence. If far context matters, the window model should lose most on long "
        "sentences and self-attention least. All variants are scored on the same test sentences, so the comparison "
        "between models within a bucket is fair; across buckets the sentences differ in more than length "
        "(genre, punctuation), so an absolute drop is not caused by length alone.")
    groups = [g for g in c.done if any(r.evaluation for r in g.runs)]
    if not groups:
        d.p("Not computed: needs re-evaluation of the checkpoints (run without --no-eval).")
    else:
        buckets = c.buckets()
        per_run = {id(r): bucket_scores(c.task, r.evaluation["scheme"], decode(r.evaluation, "gold"),
                                        decode(r.evaluation, "pred"), buckets)
                   for g in groups for r in g.runs if r.evaluation}
        first = next(iter(per_run.values()))
        stats = {g.variant: [mean_std(per_run[id(r)][b]["score"] for r in g.runs if id(r) in per_run)
                             for b in range(len(buckets))] for g in groups}
        names = [bucket_label(b) for b in buckets]
        d.table(["variant"] + [f"{n} ({first[i]['n_sent']} sent., {first[i]['n_tok']} tok.)" for i, n in enumerate(names)],
                [[f"`{v}`"] + [fmt(s) for s in ss] for v, ss in stats.items()],
                f"Test {METRIC_TEXT[m]} on the sentences of each length bucket (tokens per sentence; the last bucket "
                "ends at the longest test sentence), predicted by the report from each run's best checkpoint; "
                "mean ± std over seeds.")
        path = lines_by_bucket(names, stats, f"test {m} (%)", f"test {m} by sentence length",
                               c.fig("length_buckets.png"), counts=[b["n_tok"] for b in first])
        d.figure(path, f"Test {m} by sentence-length bucket (x: tokens per sentence, with the number of test tokens "
                       "in the bucket), one line per variant, whiskers ± std over seeds.")
        d.p(_length_verdict(groups, stats, names, first))

    # seen vs unseen: from the re-evaluation when there is one, else metrics.json (POS has both)
    seen, unseen, counts = {}, {}, None
    for g in c.done:
        s_vals, u_vals = [], []
        for r in g.runs:
            if r.evaluation:
                acc = token_accuracy(decode(r.evaluation, "gold"), decode(r.evaluation, "pred"), unseen_mask(r.evaluation))
                counts = (acc["n_tokens"] - acc["n_unseen"], acc["n_unseen"])
            else:
                acc = r.metrics.get("test") or {}
            s_vals.append(acc.get("acc_seen"))
            u_vals.append(acc.get("acc_unseen"))
        seen[g.variant], unseen[g.variant] = mean_std(s_vals), mean_std(u_vals)
    rows = [[f"`{v}`", fmt(seen[v]), fmt(unseen[v])] for v in seen]
    d.table(["variant", "seen words", "unseen words"], rows,
            "Test token accuracy (%) on words seen in training vs words not in the training vocabulary "
            "(decided with each model's saved vocabulary, after its normalisation), mean ± std over seeds"
            + (f"; {counts[0]} seen and {counts[1]} unseen test tokens." if counts else ".")
            + ("" if c.task == "pos" else " For NER this is token accuracy incl. the O tag, not entity F1."))
    if any(s[0] is not None for s in seen.values()):
        path = grouped_bars(["seen", "unseen"], {v: [seen[v], unseen[v]] for v in seen}, "test token accuracy (%)",
                            "seen vs unseen words", c.fig("seen_unseen.png"), horizontal_labels=True)
        d.figure(path, "Test token accuracy on seen vs unseen (out-of-vocabulary) words, per variant "
                       "(mean over seeds, whiskers ± std).")


def _role(g: Group) -> str | None:
    target = str((g.runs[0].config.get("model") or {}).get("_target_", ""))
    for role, needle in (("window", "Window"), ("rnn", "LSTM"), ("rnn", "RNN"), ("attention", "Attention")):
        if needle in target:
            return role
    return None


MIN_BUCKET = {"n_tok": 500, "n_sent": 30}  # a bucket this small is noise, not a trend (F1 on 8 sentences)


def _length_verdict(groups: list[Group], stats: dict[str, list[Stat]], names: list[str],
                    counts: list[dict[str, int]]) -> str:
    """Change from the shortest bucket to the longest with enough test data (else the longest), per
    variant, and whether the order of the changes matches the claim."""
    enough = [i for i, b in enumerate(counts) if all(b[k] >= v for k, v in MIN_BUCKET.items())]
    last = enough[-1] if enough and enough[-1] > 0 else len(counts) - 1
    if last <= 0:
        return "Only one length bucket: no comparison across lengths."
    change = {}
    for g in groups:
        a, b = stats[g.variant][0][0], stats[g.variant][last][0]
        if a is not None and b is not None:
            change[g.variant] = b - a
    if not change:
        return ""
    which = (f"the longest bucket with ≥ {MIN_BUCKET['n_sent']} sentences and ≥ {MIN_BUCKET['n_tok']} tokens"
             if enough and enough[-1] == last else "the longest bucket")
    text = (f"Change from {names[0]} to {names[last]} tokens ({which}): "
            + "; ".join(f"`{v}` {stats[v][0][0]:.2f} → {stats[v][last][0]:.2f} ({d:+.2f})" for v, d in change.items())
            + ". ")
    roles: dict[str, list[float]] = {}
    for g in groups:
        if g.variant in change and _role(g) and g.runs[0].max_train_len is None:
            roles.setdefault(_role(g), []).append(change[g.variant])
    if {"window", "rnn", "attention"} <= roles.keys():
        w, r, a = (max(roles[k]) for k in ("window", "rnn", "attention"))
        order = "match" if w <= r <= a else "do not match"
        text += (f"Ordered by change (most negative = loses most on long sentences), the data {order} the claim's "
                 f"prediction window ≤ RNN ≤ self-attention (best variant of each family: {w:+.2f}, {r:+.2f}, {a:+.2f}). "
                 "Differences smaller than the std over seeds in the table above are not evidence either way.")
    return text


def _curves(c: Context, g: Group) -> dict[str, list[float]] | None:
    per_run = []
    for r in g.runs:
        curve = read_curve(r.path / "csv" / "metrics.csv", c.metric)
        if curve:
            fit = r.metrics.get("fit_seconds") or 0.0
            per_run.append({e: (v, fit * (i + 1) / len(curve)) for i, (e, _, v) in enumerate(curve)})
    if not per_run:
        return None
    epochs = sorted({e for pr in per_run for e in pr})
    out: dict[str, list[float]] = {"epoch": [], "mean": [], "std": [], "seconds": []}
    for e in epochs:
        vals = [pr[e] for pr in per_run if e in pr]
        mean, std = mean_std(v for v, _ in vals)
        out["epoch"].append(e + 1)
        out["mean"].append(mean)
        out["std"].append(std or 0.0)
        out["seconds"].append(statistics.fmean(t for _, t in vals))
    return out


def section_curves(c: Context) -> None:
    from tagger.report_plots import learning_curves

    d = c.doc
    d.h(2, "4. Learning curves")
    series = {g.variant: s for g in c.done if (s := _curves(c, g))}
    if not series:
        d.p("No Lightning CSV logs (csv/metrics.csv) found in the runs.")
        return
    path = learning_curves(series, f"dev {c.metric} (%)", c.fig("learning_curves.png"))
    d.figure(path, f"Dev {METRIC_TEXT[c.metric]} after each epoch, from each run's csv/metrics.csv "
                   "(mean over the seeds that reached that epoch; band ± std). Right: the same against wall time; "
                   "the CSV log has no timestamps, so the time at epoch e is estimated as fit_seconds × e / epochs "
                   "(equal time per epoch, validation included).")


def section_ablation(c: Context) -> None:
    from tagger.report_plots import hbars

    d, m = c.doc, c.metric
    d.h(2, "5. Self-attention ablation")
    groups = [g for g in c.done if "pos_encoding" in (g.runs[0].config.get("model") or {})
              and g.runs[0].max_train_len is None]
    if len(groups) < 2:
        d.p("No ablation among these runs (fewer than two self-attention configurations); "
            "see `make ablation` (`experiment=ablate_attention`).")
        return
    factors = {g.variant: {f: json.dumps(g.runs[0].config["model"].get(f)).strip('"') for f in ABLATION_FACTORS}
               | {"head": str(g.runs[0].metrics.get("head"))} for g in groups}
    names = list(ABLATION_FACTORS) + ["head"]
    # the baseline of a one-factor-at-a-time sweep takes the most common value of every factor
    mode = {f: max(sorted({v[f] for v in factors.values()}), key=lambda x: sum(v[f] == x for v in factors.values()))
            for f in names}
    base = next((g for g in groups if factors[g.variant] == mode), None)
    base_dev = mean_std(r.score("dev") for r in base.runs)[0] if base else None
    rows = []
    for g in groups:
        f = factors[g.variant]
        dev = mean_std(r.score("dev") for r in g.runs)
        cells = [f"**{f[k]}**" if base and f[k] != mode[k] else f[k] for k in names]
        epochs = sorted({str(r.config.get("trainer", {}).get("max_epochs")) for r in g.runs})
        other = [kv for kv in g.variant.split(" ")[1:] if kv.split("=", 1)[0] not in (*ABLATION_FACTORS, "head")]
        rows.append(cells + [" ".join(other) or "–"] + [len(g.runs), fmt(dev), "baseline" if g is base else _num(
            dev[0] - base_dev if base_dev is not None and dev[0] is not None else None, 2),
            fmt(mean_std(r.score("test") for r in g.runs)), fmt_params(r.metrics.get("params") for r in g.runs),
            fmt(mean_std(r.metrics.get("fit_seconds") for r in g.runs), 0, True), "/".join(epochs)])
    d.table(names + ["other differences", "n", f"dev {m}", "Δ dev vs baseline", f"test {m}", "params", "fit time (s)", "max epochs"], rows,
            f"Self-attention variants (dev and test {METRIC_TEXT[m]}, mean ± std over n seeds). "
            + ("Baseline: the variant with the most common value of every factor (the centre of a one-factor-at-a-time "
               "sweep); **bold** marks where a variant departs from it. " if base else "No single baseline variant. ")
            + "pos_combine acts only on absolute encodings (sinusoidal, learned): with relative or none it changes nothing. "
            "Trained for the max epochs shown — short trainings rank variants, they do not give final accuracy.")
    path = hbars([g.variant for g in groups], {"dev": [mean_std(r.score("dev") for r in g.runs) for g in groups],
                                               "test": [mean_std(r.score("test") for r in g.runs) for g in groups]},
                 METRIC_TEXT[m], f"self-attention ablation: dev and test {m}", c.fig("ablation.png"))
    d.figure(path, f"Dev and test {m} of each self-attention variant (mean over seeds, whiskers ± std).")


def section_attention(c: Context) -> None:
    from tagger.checkpoint import load_checkpoint
    from tagger.inference import Predictor
    from tagger.report_plots import attention_heads

    d = c.doc
    d.h(2, "6. Attention heat maps")
    if c.args.no_eval:
        d.p("Not drawn (--no-eval).")
        return
    candidates = sorted((r for r in c.runs if r.ok and r.evaluation and "heads" in (r.config.get("model") or {})),
                        key=lambda r: -r.score("dev"))
    if not candidates:
        d.p("No self-attention run among these runs.")
        return
    run = candidates[0]
    loaded = load_checkpoint(checkpoint_of(run))
    predictor = Predictor(loaded.tagger, loaded.vocab, batch_size=1)
    tokens = load_corpus(run.config["data"]["corpus"], c.args.data_dir)["test"]["tokens"]
    chosen = pick_sentences(tokens, c.args.attention_sentences, predictor.window)
    n_layers = len(loaded.tagger.encoder.blocks)
    layer = c.args.attention_layer % n_layers
    d.p(f"Run `{run.path}` (`{run.variant}`, the self-attention run with the highest dev {c.metric}), layer "
        f"{layer + 1} of {n_layers} (--attention-layer), test sentences chosen by length (--attention-sentences). "
        "Each panel is one head; row = query token, column = key token; each row sums to 1 over the sentence "
        "(model in eval mode, no dropout).")
    for k, i in enumerate(chosen):
        weights = predictor.attention(tokens[i])[layer]  # [head][q][k]
        path = attention_heads(tokens[i], weights, f"{run.variant} — layer {layer + 1}, test sentence {i}",
                               c.fig(f"attention_{k + 1}.png"))
        d.figure(path, f"Attention weights of layer {layer + 1}, all {len(weights)} heads, test sentence {i} "
                       f"({len(tokens[i])} tokens): “{' '.join(tokens[i])}”.")


def pick_sentences(tokens: Sequence[Sequence[str]], n: int, limit: int) -> list[int]:
    """Indices of n test sentences of spread lengths (about 8 to 24 tokens, at most ``limit``)."""
    targets = [8 + round(16 * k / max(1, n - 1)) for k in range(n)] if n > 1 else [12]
    chosen: list[int] = []
    for t in targets:
        best = min((i for i in range(len(tokens)) if i not in chosen and 0 < len(tokens[i]) <= limit),
                   key=lambda i: (abs(len(tokens[i]) - t), i), default=None)
        if best is not None:
            chosen.append(best)
    return chosen


def section_extrapolation(c: Context) -> None:
    from tagger.report_plots import lines_by_bucket

    d, m = c.doc, c.metric
    d.h(2, "7. Length extrapolation")
    runs = [r for r in c.runs if r.ok and r.max_train_len is not None]
    if not runs:
        d.p("No run trained on short sentences only (data.max_train_len) among these runs; see "
            "`experiment=length_extrapolation`.")
        return
    if not any(r.evaluation for r in runs):
        d.p("Not computed: needs re-evaluation of the checkpoints (run without --no-eval).")
        return
    limit = max(r.max_train_len for r in runs)
    longest = max(len(s) for r in runs if r.evaluation for s in r.evaluation["gold"])
    buckets = c.buckets(runs, extra_edges=[limit])
    names = [bucket_label(b) for b in buckets]
    series: dict[str, list[Stat]] = {}
    notes, counts = [], None
    encodings = {r.variant: (r.config.get("model") or {}).get("pos_encoding", "?") for r in runs}
    by_encoding = len(set(encodings.values())) == len(encodings)  # else name lines by the full variant
    for g in c.done:
        rs = [r for r in g.runs if r.max_train_len is not None and r.evaluation]
        if not rs:
            continue
        pos_enc = (rs[0].config.get("model") or {}).get("pos_encoding", "?")
        windowed = any("pred_windowed" in r.evaluation for r in rs)
        name = pos_enc if by_encoding else g.variant
        for key, label in (("pred", f"{name}, whole sentence" if windowed else name),
                           ("pred_windowed", f"{name}, {limit}-token windows")):
            scores = [bucket_scores(c.task, r.evaluation["scheme"], decode(r.evaluation, "gold"),
                                    decode(r.evaluation, key), buckets) for r in rs if key in r.evaluation]
            if scores:
                counts = counts or [b["n_tok"] for b in scores[0]]
                series[label] = [mean_std(s[i]["score"] for s in scores) for i in range(len(buckets))]
        ev = rs[0].evaluation
        if pos_enc == "learned":
            table_len = (rs[0].config.get("model") or {}).get("max_len")
            if table_len is not None and table_len <= limit:
                notes.append(f"learned: the position table holds {table_len} positions; sentences longer than "
                             f"{table_len} tokens are tagged in overlapping {table_len}-token windows "
                             "(tagger.inference.Predictor; each token keeps the tag from the window where it is "
                             "most central).")
            else:
                notes.append(
                    f"learned: the position table has {table_len} rows but training sentences had at most {limit} "
                    f"tokens, so rows {limit + 1}–{table_len} were never trained (they keep their random "
                    "initialisation, shrunk by weight decay). Shown two ways: *whole sentence* (positions past "
                    f"{limit} use those untrained rows) and *{limit}-token windows* (sentences longer than {limit} "
                    f"tokens are tagged in overlapping {limit}-token windows, overlap {ev.get('window_overlap')}, each "
                    "token keeping the tag from the window where it is most central — tagger.inference.Predictor).")
    d.table(["encoding"] + [f"{n} ({counts[i]} tok.)" for i, n in enumerate(names)],
            [[k] + [fmt(s) for s in v] for k, v in series.items()],
            f"Test {METRIC_TEXT[m]} by sentence length for models trained only on sentences of ≤ {limit} tokens "
            f"(data.max_train_len={limit}), evaluated on the whole test split up to its longest sentence "
            f"({longest} tokens); mean ± std over seeds.")
    path = lines_by_bucket(names, series, f"test {m} (%)", f"trained on ≤ {limit} tokens: test {m} by length",
                           c.fig("length_extrapolation.png"), counts=counts,
                           vline_after=max(i for i, b in enumerate(buckets) if b[1] <= limit),
                           vline_label=f"longest training sentence ({limit})")
    d.figure(path, f"Test {m} by sentence length for the positional encodings, trained on sentences of ≤ {limit} "
                   "tokens only: buckets right of the dashed line are longer than anything seen in training.")
    d.bullets(["sinusoidal: a fixed function of the position, defined at every length.",
               "relative: a learned bias per clipped distance i−j (±model.max_distance), so any length reuses "
               "trained distances.",
               "alibi: the relative bias plus a fixed per-head penalty −m·|i−j| that keeps growing with the "
               "distance, so far tokens stay discounted at any length."] + notes)


def section_best(c: Context, best: Run | None) -> None:
    d = c.doc
    d.h(2, "8. Best model")
    if best is None:
        d.p("No completed run.")
        return
    d.p(f"Chosen by the highest **dev** {c.metric} over all completed runs (not by test): `{best.variant}`, "
        f"seed {best.seed}, dev {best.score('dev'):.2f}, test {_num(best.score('test'))}. "
        f"Run dir `{best.path}`, checkpoint `{checkpoint_of(best) or best.metrics.get('best_checkpoint')}`. "
        "`best.json` holds its config and metrics for packaging.")


def section_commands(c: Context) -> None:
    d = c.doc
    d.h(2, "Commands")
    d.p("This report:")
    d.code(c.args.command)
    for s in c.sweeps:
        params = " ".join(f"{k}={v}" for k, v in s.params.items())
        jobs = f"{len(s.expected)} jobs" if s.expected is not None else (f"{s.n_trials} trials" if s.n_trials else "")
        d.p(f"Sweep `{s.path}` ({jobs}; sweeper params `{params or '(none)'}`):")
        d.code(s.command)
    rows = [[f"`{r.path}`", f"`{r.variant}`", r.seed,
             "ok" if r.ok else "no results", _num(r.score("dev")) if r.ok else "–", _num(r.score("test")) if r.ok else "–",
             f"`{r.metrics.get('command')}`" if r.metrics else f"overrides: `{' '.join(r.overrides)}`"]
            for r in c.runs]
    d.table(["run dir", "variant", "seed", "status", f"dev {c.metric}", f"test {c.metric}", "command"], rows,
            "Every run dir found, with the command that reproduces it (from metrics.json; for runs without "
            "results, the overrides in .hydra/overrides.yaml).")


# --------------------------------------------------------------------------- #
# Outputs
# --------------------------------------------------------------------------- #


def best_json(best: Run, c: Context) -> dict[str, Any]:
    ckpt = checkpoint_of(best)
    return {
        "selected_by": f"dev {c.metric}",
        "reason": f"highest dev {c.metric} ({best.score('dev'):.2f}) among {sum(r.ok for r in c.runs)} completed runs; "
                  "test metrics were not used",
        "run_dir": str(best.path),
        "checkpoint": str(ckpt) if ckpt else best.metrics.get("best_checkpoint"),
        "task": c.task,
        "model": best.metrics.get("model"),
        "head": best.metrics.get("head"),
        "variant": best.variant,
        "seed": best.seed,
        "main_metric": c.metric,
        "dev": best.metrics.get("dev"),
        "test": best.metrics.get("test"),
        "command": best.metrics.get("command"),
        "config": best.config,
    }


_OUR_FILES = ("report.md", "report.html", "best.json", "main.png", "per_tag.png", "per_type.png", "length_buckets.png",
              "seen_unseen.png", "learning_curves.png", "ablation.png", "length_extrapolation.png")


def make_report(paths: Sequence[Path], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    runs, sweeps = find_runs(paths)
    if not runs:
        raise ReportError(f"no run dir (metrics.json or .hydra/config.yaml) under {', '.join(map(str, paths))}")
    task = _task_of(runs)
    missing = missing_jobs(runs, sweeps)
    assign_variants(runs)
    groups = make_groups(runs, missing)
    out.mkdir(parents=True, exist_ok=True)
    for p in [*(out / n for n in _OUR_FILES), *out.glob("attention_*.png")]:
        p.unlink(missing_ok=True)  # a figure from an earlier report must not survive as if current

    if not args.no_eval:
        for r in runs:
            if r.ok:
                try:
                    r.evaluation = evaluate_run(r, out / "cache", args.threads, args.batch_size, args.data_dir)
                except Exception as e:  # a broken checkpoint or missing corpus is reported, not fatal
                    r.eval_problem = f"{type(e).__name__}: {e}"
    c = Context(runs, groups, sweeps, missing, task, MAIN_METRIC[task], out, args)
    best = best_run(runs)
    section_summary(c, best)
    section_main(c)
    section_per_label(c)
    section_length_unseen(c)
    section_curves(c)
    section_ablation(c)
    section_attention(c)
    section_extrapolation(c)
    section_best(c, best)
    section_commands(c)

    (out / "report.md").write_text(c.doc.markdown(), encoding="utf-8")
    title = c.args.title or f"{task.upper()} comparison"
    (out / "report.html").write_text(c.doc.html(title), encoding="utf-8")
    if best is not None:
        from tagger.fileio import write_json

        write_json(out / "best.json", best_json(best, c))  # what packaging reads: never half-written
    return {"out": str(out), "runs": len(runs), "completed": sum(r.ok for r in runs), "missing": len(missing),
            "best": str(best.path) if best else None, "figures": [p.name for p in c.figures]}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tagger.report", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR", help="run dirs or sweep dirs (searched recursively)")
    p.add_argument("--out", type=Path, required=True, help="output folder, e.g. reports/pos")
    p.add_argument("--no-eval", action="store_true", help="skip checkpoint re-evaluation (speed, length, attention)")
    p.add_argument("--threads", type=int, default=2, help="torch threads for the inference-speed measurement")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--data-dir", default=None, help="where the corpora are, if not where the runs were trained")
    p.add_argument("--edges", type=lambda s: tuple(int(x) for x in s.split(",")), default=DEFAULT_EDGES,
                   help="upper bounds of the length buckets (default 10,20,30,40,60; the last bucket is open)")
    p.add_argument("--attention-layer", type=int, default=-1, help="layer of the heat maps (default: last)")
    p.add_argument("--attention-sentences", type=int, default=3)
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    args.command = " ".join(["python -m tagger.report", *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = make_report(args.paths, args.out, args)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
