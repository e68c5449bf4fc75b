"""The transfer section: runs that started from another model (``init_from``) beside the same encoder trained from
scratch, and each source model scored zero-shot on the report's corpus."""
from __future__ import annotations

from typing import Any

from tagger.report.sections import Context, _num
from tagger.report.stats import fmt, mean_std
from tagger.report.sweeps import Run
from tagger.schemes import entity_kind


def _kinds(labels: list[str]) -> set[str]:
    """Entity types (``B-PER`` -> ``PER``) or, for labels without a prefix, the labels themselves."""
    return {(entity_kind(label) or (None, label))[1] for label in labels if label != "O"}


def zero_shot_map(source_labels: list[str], target_labels: list[str], label_map: dict[str, str]) -> dict[str, str]:
    """The run's ``label_map``, plus every source type the target corpus does not annotate mapped to ``O``
    (dropped: the target's annotators never marked it). A target type the source never had is never predicted:
    its entities all count as missed."""
    target = _kinds(target_labels)
    mapped = {kind: label_map.get(kind, kind) for kind in _kinds(source_labels)}
    return dict(label_map) | {kind: "O" for kind, name in mapped.items() if name not in target and name != "O"}


def zero_shot(run: Run, data_dir: str | None) -> dict[str, Any]:
    """The source of ``run`` scored on ``run``'s corpus, dev and test: ``{"dev": metrics, "test": metrics,
    "label_map": ...}``."""
    from tagger.artifacts import runs
    from tagger.inference.scoring import evaluate_split, load_corpus

    init = run.metrics["init_from"]
    loaded = runs.load(init.get("checkpoint") or init.get("store_tag") or init["source"])
    data = load_corpus(run.config["data"]["corpus"], data_dir)
    label_map = zero_shot_map(loaded.vocab.labels, data["train"].features["tags"].feature.names,
                              init.get("label_map") or {})
    out: dict[str, Any] = {"label_map": label_map}
    for split, key in (("validation", "dev"), ("test", "test")):
        if split in data:
            out[key] = evaluate_split(loaded.tagger, loaded.vocab, data[split], label_map=label_map)
    return out


def section_transfer(c: Context) -> None:
    finetuned = [r for r in c.runs if r.ok and r.metrics.get("init_from")]
    if not finetuned:
        return
    d, m = c.doc, c.metric
    d.h(2, "Transfer: from scratch, fine-tuned, zero-shot")
    sources: dict[str, Run] = {}
    for r in finetuned:
        sources.setdefault(r.metrics["init_from"]["source"], r)
    scores = {}
    for source, r in sources.items():
        init = r.metrics["init_from"]
        if init.get("source_task") is not None:  # the source had several tasks (its task is recorded as one of them)
            scores[source] = {"problem": f"a multi-task model (its {init['source_task']} head started this run): "
                                         "zero-shot is scored for single-task sources"}
            continue
        if init.get("task") not in (None, r.metrics.get("task")):
            scores[source] = {"problem": f"a {init['task']} model (cross-task): its labels are not this corpus's kind"}
            continue
        try:
            scores[source] = zero_shot(r, c.args.data_dir)
        except Exception as e:  # a source that is gone is reported, not fatal
            scores[source] = {"problem": f"{type(e).__name__}: {e}"}
    rows = []
    for g in c.done:
        init = g.runs[0].metrics.get("init_from")
        start = "from scratch" if not init else f"fine-tuned from {init.get('data')} {init.get('model')} (init_from)"
        dev, test = (mean_std(r.score(k) for r in g.runs) for k in ("dev", "test"))
        rows.append([f"`{g.variant}`", start, f"{len(g.runs)}", fmt(dev), fmt(test)])
    for source, s in scores.items():
        init = sources[source].metrics["init_from"]
        if "problem" in s:
            rows.append([f"`{init.get('model')}` zero-shot", f"{init.get('data')} model", "1", "–",
                         f"not scored: {s['problem']}"])
            continue
        source_dev = f" (source dev {init['dev']:.2f})" if isinstance(init.get("dev"), (int, float)) else ""
        rows.append([f"`{init.get('model')}` zero-shot{source_dev}", f"{init.get('data')} model as trained, no training here", "1",
                     _num(s.get("dev", {}).get(m)), _num(s.get("test", {}).get(m))])
    d.table(["variant", "start", "seeds", f"dev {m}", f"test {m}"], rows,
            "Fine-tuned runs start from the model named by init_from (metrics.json records its path, scores, config "
            "and commit); zero-shot rows score that model on this corpus without any training on it. Test is shown "
            "beside dev and was never used to choose.")
    maps = sorted({f"{k}→{v}" for s in scores.values() for k, v in (s.get("label_map") or {}).items()})
    d.p("Zero-shot scoring renames the source's types with the run's transfer.label_map and drops (maps to O) every "
        "source type this corpus does not annotate" + (f" ({', '.join(maps)})" if maps else "")
        + "; a type of this corpus that the source never had is never predicted, so its entities all count as missed.")
