"""The report's comparison sections: summary, main results, per-label scores, sentence length and unseen
words, learning curves, the best model and the commands; each appends to the :class:`Context`'s document."""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tagger.metrics import task_metrics, token_accuracy
from tagger.report.document import Doc
from tagger.report.evaluation import checkpoint_of, decode, unseen_mask
from tagger.report.stats import Stat, bucket_edges, bucket_label, bucket_scores, fmt, fmt_params, mean_std
from tagger.report.sweeps import ReportError, Run, Sweep, read_curve
from tagger.report.variants import Group

METRIC_TEXT = {
    "acc": "token accuracy (%)",
    "f1": "entity F1 (%, exact span and type, seqeval strict mode)",
}


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
    threads = sorted({str(r.metrics.get("threads")) for r in c.runs if r.ok and not r.scores_only})
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
        from tagger.report.plots import hbars

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
    from tagger.report.plots import grouped_bars

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
    from tagger.report.plots import grouped_bars, lines_by_bucket

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

    # seen vs unseen: from the re-evaluation when there is one, else metrics.json (POS has both); unseen words of
    # models with vectors split into those the vectors cover and those that reach the model as UNK
    seen, unseen, by_vector, counts, split_counts = {}, {}, {}, None, {}
    for g in c.done:
        s_vals, u_vals, v_vals, k_vals = [], [], [], []
        for r in g.runs:
            if r.evaluation:
                gold, pred = decode(r.evaluation, "gold"), decode(r.evaluation, "pred")
                acc = token_accuracy(gold, pred, unseen_mask(r.evaluation))
                counts = (acc["n_tokens"] - acc["n_unseen"], acc["n_unseen"])
                if "unknown" in r.evaluation:
                    vec = token_accuracy(gold, pred, unseen_mask(r.evaluation, "vector"))
                    unk = token_accuracy(gold, pred, unseen_mask(r.evaluation, "unknown"))
                    v_vals.append(vec["acc_unseen"])
                    k_vals.append(unk["acc_unseen"])
                    split_counts.setdefault(g.variant, (vec["n_unseen"], unk["n_unseen"]))
            else:
                acc = r.metrics.get("test") or {}
            s_vals.append(acc.get("acc_seen"))
            u_vals.append(acc.get("acc_unseen"))
        seen[g.variant], unseen[g.variant] = mean_std(s_vals), mean_std(u_vals)
        by_vector[g.variant] = (mean_std(v_vals), mean_std(k_vals))
    with_vectors = any(n_vec for n_vec, _ in split_counts.values())
    header = ["variant", "seen words", "unseen words"]
    rows = [[f"`{v}`", fmt(seen[v]), fmt(unseen[v])] for v in seen]
    if with_vectors:
        header += ["unseen, in the vectors", "unseen, in neither (UNK)", "unseen test tokens: in the vectors / UNK"]
        for row, v in zip(rows, seen):
            n_vec, n_unk = split_counts.get(v, (None, None))
            row += [fmt(by_vector[v][0]) if n_vec else "–", fmt(by_vector[v][1]),
                    f"{n_vec:,} / {n_unk:,}" if n_vec is not None else "–"]
    d.table(header, rows,
            "Test token accuracy (%) on words seen in training vs words not in the training vocabulary "
            "(decided with each model's saved vocabulary, after its normalisation), mean ± std over seeds"
            + (f"; {counts[0]} seen and {counts[1]} unseen test tokens (of the last model read)" if counts else "")
            + (". The unseen words of models with pretrained vectors are split into those the vectors cover (the "
               "model reads their vector) and those in neither training nor the vectors (the model reads UNK and "
               "their characters); a model without vectors has only the second kind" if with_vectors else "")
            + "." + ("" if c.task == "pos" else " For NER this is token accuracy incl. the O tag, not entity F1."))
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
        # a task of a multi-task run logs its metrics as val/TASK/METRIC
        curve = read_curve(r.path / "csv" / "metrics.csv", f"{r.model_task}/{c.metric}" if r.model_task else c.metric)
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
    from tagger.report.plots import learning_curves

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
