"""The report's sections on self-attention itself: the ablation of its design choices, attention heat
maps, and length extrapolation of the positional encodings."""
from __future__ import annotations

import json
from typing import Sequence

from tagger.report.evaluation import checkpoint_of, decode
from tagger.report.sections import METRIC_TEXT, Context, _num
from tagger.report.stats import Stat, bucket_label, bucket_scores, fmt, fmt_params, mean_std

ABLATION_FACTORS = ("pos_encoding", "pos_combine", "score", "window")


def section_ablation(c: Context) -> None:
    from tagger.report.plots import hbars

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
    from tagger.artifacts.checkpoint import load_checkpoint
    from tagger.inference.predictor import Predictor
    from tagger.inference.scoring import load_corpus
    from tagger.report.plots import attention_heads

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
    from tagger.report.plots import lines_by_bucket

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
                             "(tagger.inference.predictor.Predictor; each token keeps the tag from the window where "
                             "it is most central).")
            else:
                notes.append(
                    f"learned: the position table has {table_len} rows but training sentences had at most {limit} "
                    f"tokens, so rows {limit + 1}–{table_len} were never trained (they keep their random "
                    "initialisation, shrunk by weight decay). Shown two ways: *whole sentence* (positions past "
                    f"{limit} use those untrained rows) and *{limit}-token windows* (sentences longer than {limit} "
                    f"tokens are tagged in overlapping {limit}-token windows, overlap {ev.get('window_overlap')}, each "
                    "token keeping the tag from the window where it is most central — "
                    "tagger.inference.predictor.Predictor).")
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
