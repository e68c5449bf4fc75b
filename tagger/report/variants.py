"""Variants: model name + the config values that differ between runs of that model; seeds of one
variant form a group; the best run is chosen by the dev metric."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from tagger.report.sweeps import Run, Sweep, _identity

MODEL_ORDER = ("window_fc", "bilstm", "self_attention", "self_attention_ner")  # lecture order: window, RNN, attention
# config keys that differ between runs without making them different models
_NOT_VARIANT = ("seed", "data.seed", "output_dir", "ckpt_path", "data_dir", "data.corpus.data_dir", "ablation",
                # where and how checkpoints are written, and the fused AdamW (the same updates as the loop one,
                # tests/training/test_optimizer.py): none changes what a run learns
                "callbacks.model_checkpoint.save_last", "callbacks.last_checkpoint", "trainer.plugins",
                "optimizer.fused")
# keys added to the configs with a default that is what runs made before them did: absent counts as that value
_ABSENT_MEANS = {"data.corpus.encoding": "utf-8", "transfer.task": "null"}
_NAMED_GROUPS = {"model": "model_name", "head": "head_name", "data": "data_name"}


def _flatten(d: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(d, dict):
        out: dict[str, str] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d if isinstance(d, str) else json.dumps(d)}


def _varying_config(run: Run) -> dict[str, str]:
    flat = _ABSENT_MEANS | _flatten(run.config)
    out_dir = str(run.config.get("output_dir") or run.path)
    return {k: v for k, v in flat.items() if not _not_variant(k) and out_dir not in v}


def _not_variant(key: str) -> bool:
    """Whether the config key is one of :data:`_NOT_VARIANT`; a key of a task of a multi-task run
    (``tasks.NAME.data.seed``) is read as a run's own (``data.seed``)."""
    key = re.sub(r"^tasks\.[^.]+\.", "", key)
    return any(key == p or key.startswith(p + ".") for p in _NOT_VARIANT)


def _short(key: str) -> str:
    if key in _NAMED_GROUPS.values():
        return key.removesuffix("_name")
    return key.removeprefix("model.")


def _label_value(v: str) -> str:
    """Sampled floats (Optuna) shortened to 4 significant digits."""
    return f"{float(v):.4g}" if re.fullmatch(r"-?\d+\.\d{5,}", v) else v


def assign_variants(runs: Sequence[Run]) -> None:
    """Label every run. Completed runs: model name (and the run's ``label``, if any) + ``key=value`` for each
    config value that differs between completed runs of that model and label (keys of a group chosen by name, e.g.
    ``head.*``, only count when they differ between runs with the same choice). Runs without results take the label of
    completed runs with the same overrides (seed aside), else a label from their overrides."""
    ok = [r for r in runs if r.ok]
    flats = {id(r): _varying_config(r) for r in ok}
    by_model: dict[str, list[Run]] = {}
    for r in ok:  # a run with a label (one task of a multi-task run, a results row) is named by it beside its model
        by_model.setdefault(" ".join(filter(None, (str(r.metrics.get("model")), r.label))), []).append(r)
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
        by_overrides = _override_labels(group, flats)
        for r in group:
            extra = " ".join(f"{_short(k)}={_label_value(flats[id(r)].get(k, 'unset'))}" for k in varying)
            r.variant = f"{name} {by_overrides[id(r)] if by_overrides else extra}".strip()
    # a source is named by its corpus and model, not by the path it had on the machine that trained it; where runs
    # start from several sources of one corpus and model, each is told apart by its dev score
    sources: dict[str, set[str]] = {}
    for r in ok:
        if init := r.metrics.get("init_from"):
            sources.setdefault(f"{init.get('data')}:{init.get('model')}", set()).add(init.get("source"))
    for r in ok:
        if init := r.metrics.get("init_from"):
            name = f"{init.get('data')}:{init.get('model')}"
            if len(sources[name]) > 1 and isinstance(init.get("dev"), (int, float)):
                name += f"@dev{init['dev']:.2f}"
            r.variant = re.sub(r"init_from=\S+", f"init_from={name}", r.variant)
    labels = {r.identity(): r.variant for r in ok}
    for r in runs:
        if not r.ok:
            r.variant = label_without_results(r.overrides, labels, r.model_choice)


def _override_labels(group: Sequence[Run], flats: dict[int, dict[str, str]]) -> dict[int, str] | None:
    """Labels from the command lines where runs of different ``experiment=`` configurations meet: an
    experiment changes many config values at once, which as ``key=value`` pairs make an unreadable label, while
    the overrides that differ between the runs (``experiment=pos_self_attention_best callbacks=swa``) name
    the variant as it was run. None where no experiments differ, or where runs with the same overrides
    (seed aside) differ in their config: then only the config values tell them apart. ``flats``: each run's
    :func:`_varying_config` (seed excluded), by ``id(run)``."""
    idents = {id(r): {o for o in r.identity() if not o.lstrip("+~").startswith("model=")} for r in group}
    experiments = {next((o for o in i if o.startswith("experiment=")), None) for i in idents.values()}
    if len(experiments) < 2:
        return None
    common = set.intersection(*idents.values())
    labels = {key: " ".join(sorted(i - common, key=lambda o: (not o.startswith("experiment="), o)))
              for key, i in idents.items()}
    configs: dict[str, str] = {}
    for r in group:  # one label, one config (seed aside)
        config = json.dumps(flats[id(r)], sort_keys=True)
        if configs.setdefault(labels[id(r)], config) != config:
            return None
    return labels


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


def best_run(runs: Sequence[Run]) -> Run | None:
    """The completed run with the highest dev main metric; ties go to the first path (sorted). A line of
    results.jsonl is never chosen: its checkpoint is not here. Test metrics play no part: choosing by test would leak
    the test set into model selection."""
    ok = sorted((r for r in runs if r.ok and not r.scores_only), key=lambda r: str(r.path))
    return max(ok, key=lambda r: r.score("dev"), default=None)
