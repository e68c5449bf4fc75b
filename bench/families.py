"""Measure speed on this machine: ``python -m bench.families`` (``make bench-families``) writes
``reports/bench_families.md`` and ``.json``, every figure with the command that reproduces it.
(``make bench``, :mod:`bench.backends`, compares the inference backends and a spaCy peer.)

1. ``inference``: in-process tokens/s of each model family (window_fc, bilstm, self_attention; POS on
   EWT) at batch sizes 1, 32 and 256 with 2 threads, on the torch and ONNX Runtime backends
   (``tagger.inference.export``), over the EWT test sentences; FLOPs per token and the fraction of the CPU's
   fp32 peak that speed reaches.
2. ``training``: training tokens/s of each family (a short ``python -m tagger.train`` run, 2 threads).
3. ``http``: the BentoML service on loopback under ``bench.loadgen`` (1, 8, 32 closed-loop clients,
   30 s each): requests/s, tokens/s, p50/p95/p99 latency, errors; p99 of a 20-token sentence at one
   client; and the soak test (32 clients, 60 s, zero errors, server memory stable).

Speeds are only honest on a quiet machine: how busy the CPU is just before each section (while the
bench is idle), the load average and any other ``tagger.train`` process are recorded with the results,
and the report says when the machine was busy. ``--quick`` runs every step in seconds (a smoke test of
the bench itself, not figures to quote).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.loadgen import load_sentences  # noqa: E402
from tagger.fileio import write_text  # noqa: E402
from tagger.training.threads import running_trainings  # noqa: E402

# the folder the bench runs from (the checkout, under make bench): runs, corpora and reports are found and
# written relative to it, as tagger.train does, never inside an installed package
WORK = Path.cwd()
FAMILIES = ("window_fc", "bilstm", "self_attention")
BATCH_SIZES = (1, 32, 256)
THREADS = 2
PY = "python"  # how commands are written in the report (the venv's python when run via make)


# -- the machine -------------------------------------------------------------------------------
def read_cpuinfo() -> dict[str, Any]:
    """The first CPU's fields of ``/proc/cpuinfo`` that the benches report: model name, cpu family, cpu MHz (each
    None where absent) and the flags (empty where absent, e.g. off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""

    def field(name: str) -> str | None:
        found = re.search(rf"^{name}\s*:\s*(.*)$", text, re.M)
        return found.group(1).strip() if found else None

    return {"model": field("model name"), "family": field("cpu family"), "mhz": field("cpu MHz"),
            "flags": set((field("flags") or "").split())}


def cpu_info(fma_units: int = 2) -> dict[str, Any]:
    """Cores, clock, SIMD width and the fp32 peak = cores x GHz x FLOPs/cycle.

    FLOPs/cycle/core = FMA units x lanes x 2 (an FMA is a multiply and an add): AVX-512 has 16 fp32
    lanes (32 FLOPs per FMA unit), AVX2 8 (16). ``fma_units`` is not visible from inside a VM:
    2 is right for Zen 4/5 and for Intel server cores with two 512-bit FMA ports.
    """
    info = read_cpuinfo()
    flags, model = info["flags"], info["model"] or platform.processor() or "unknown"
    model += f" (family {info['family']})" if info["model"] and info["family"] else ""
    mhz = float(info["mhz"]) if info["mhz"] else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    simd = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    lanes = {"avx512": 16, "avx2": 8, "sse": 4}[simd]
    per_cycle = fma_units * lanes * 2
    ghz = (mhz or 0) / 1000
    return {
        "model": model, "cores": cores, "ghz": round(ghz, 3), "simd": simd, "fma_units": fma_units,
        "flops_per_cycle_per_core": per_cycle, "peak_gflops": round(cores * ghz * per_cycle, 1),
        "assumption": f"{cores} cores x {ghz:.2f} GHz (cpu MHz in /proc/cpuinfo; no turbo) x {per_cycle} fp32 "
                      f"FLOPs/cycle ({simd}: {fma_units} FMA units x {lanes} lanes x 2)",
    }


def cpu_busy_fraction(seconds: float = 2.0) -> float | None:
    """Share of all cores' time spent busy over the next ``seconds`` (Linux ``/proc/stat``), None elsewhere.
    Sampled between sections, while the bench itself is idle, so its own load does not count (the 1-minute
    load average still carries the previous section's)."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return round(1 - (idle1 - idle0) / max(total1 - total0, 1), 3)


def machine_state() -> dict[str, Any]:
    """Other training processes and how busy the CPU is now: a benchmark on a busy machine is not quotable."""
    others = running_trainings()
    load = os.getloadavg()
    busy = cpu_busy_fraction()
    calm = busy < 0.25 if busy is not None else load[0] < 0.5 * (os.cpu_count() or 1) + 0.5
    return {"loadavg_1m": round(load[0], 2), "cpu_busy": busy, "other_training_processes": others,
            "quiet": not others and calm}


# -- models and data ---------------------------------------------------------------------------
def trained_run(family: str, extra_roots: list[Path]) -> Path | None:
    """A finished run dir of this family: the comparison runs first, then the bench's own training."""
    from tagger.artifacts.runs import comparison_runs, is_trained

    candidates = comparison_runs("pos", WORK / "multirun", family) + [r / f"train_{family}" for r in extra_roots]

    return next((run for run in candidates if is_trained(run)), None)


def load_family(family: str, data_dir: Path, extra_roots: list[Path]):
    """-> (tagger, vocab, where it came from). Without a trained run: the family's default config with
    fresh weights and the EWT training vocabulary (speed does not depend on the weights' values)."""
    from tagger.artifacts import runs

    run = trained_run(family, extra_roots)
    if run is not None:
        loaded = runs.load(run)
        return loaded.tagger, loaded.vocab, str(run.relative_to(WORK) if run.is_relative_to(WORK) else run)
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tagger.data.readers import read_conllu
    from tagger.data.vocab import Vocab
    from tagger.models.tagger import build_tagger
    from tagger.train import CONF_DIR
    from tagger.training.run import model_config

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"model={family}", f"data_dir={data_dir}"], return_hydra_config=True)
    train = read_conllu(data_dir / "ud_english_ewt" / "en_ewt-ud-train.conllu")
    labels = sorted({t for s in train for t in s["tags"]})
    vocab = Vocab.build([s["tokens"] for s in train], labels, "pos")
    return build_tagger(model_config(cfg), vocab).eval(), vocab, "untrained weights (no trained run found)"


def time_predict(predictors: dict[str, Any], sentences: list[list[str]], repeats: int) -> dict[str, list[float]]:
    """tokens/s of ``repeats`` full passes per predictor, after two untimed passes each (allocator,
    caches, GC; ONNX Runtime plans memory per new input shape and its first pass over a split's
    shapes runs at half speed). The backends take turns pass by pass, so a change in machine load
    hits both alike."""
    n = sum(len(s) for s in sentences)
    for predictor in predictors.values():
        predictor.predict(sentences)
        predictor.predict(sentences)
    speeds: dict[str, list[float]] = {name: [] for name in predictors}
    for _ in range(repeats):
        for name, predictor in predictors.items():
            started = time.perf_counter()
            predictor.predict(sentences)
            speeds[name].append(round(n / (time.perf_counter() - started), 1))
    return speeds


def flops_per_token(tagger, vocab, sentences: list[list[str]], batch_size: int) -> dict[str, Any]:
    """FLOPs per real token of the Predictor pass the benchmark times (same sentences, same batch
    size, so the padding it computes is included), counted by FlopCounterMode (matmuls,
    convolutions). Two kernels it has no formula for are covered: attention runs on the reference
    path (explicit q·kᵀ and weights·v, the same arithmetic as the fused kernel) while counting, and
    LSTMs are added analytically, 2·4H·(I+H) per direction, layer and real token (packed sequences
    compute no padding)."""
    from torch.utils.flop_counter import FlopCounterMode

    from tagger.inference.predictor import Predictor

    fused = [m for m in tagger.modules() if hasattr(m, "fast_path")]
    for m in fused:
        m.fast_path = False
    try:
        with FlopCounterMode(display=False) as counter:
            Predictor(tagger, vocab, batch_size=batch_size).predict(sentences)
    finally:
        for m in fused:
            m.fast_path = True
    n = sum(len(s) for s in sentences)
    counted = counter.get_total_flops()
    lstm = 0
    for m in tagger.modules():
        if isinstance(m, torch.nn.LSTM):
            dirs, H = 2 if m.bidirectional else 1, m.hidden_size
            for layer in range(m.num_layers):
                inp = m.input_size if layer == 0 else H * dirs
                lstm += dirs * 2 * 4 * H * (inp + H)
    return {"flops_per_token": round(counted / n + lstm), "counted_per_token": round(counted / n),
            "lstm_analytic_per_token": lstm, "tokens": n, "batch_size": batch_size}


# -- 1. in-process inference -------------------------------------------------------------------
def bench_inference(args, extra_roots: list[Path], peak_gflops: float) -> tuple[list[dict], list[dict]]:
    from tagger.inference.backends import BackendError, make_backend
    from tagger.inference.predictor import Predictor

    torch.set_num_threads(args.threads)
    sentences = load_sentences(args.data_dir)
    rows, latency = [], []
    for family in args.families:
        tagger, vocab, source = load_family(family, args.data_dir, extra_roots)
        backends: dict[str, Any] = {"torch": None}
        try:
            backends["onnx"] = make_backend(tagger, vocab, "onnx", threads=args.threads)
            info = backends["onnx"].export_info
        except BackendError as e:
            print(f"[bench] {family}: no ONNX backend: {e}", file=sys.stderr)
            info = {"error": str(e)}
        for batch_size in args.batch_sizes:
            # batch 1 runs one sentence at a time: a slice of the split keeps it to seconds
            subset = sentences if batch_size > 1 else sentences[: args.batch1_sentences]
            flops = flops_per_token(tagger, vocab, subset, batch_size)
            predictors = {name: Predictor(tagger, vocab, batch_size=batch_size, backend=backend)
                          for name, backend in backends.items()}
            for name, runs in time_predict(predictors, subset, args.repeats).items():
                tokens_per_s = round(statistics.median(runs), 1)
                gflops = flops["flops_per_token"] * tokens_per_s / 1e9
                rows.append({
                    "family": family, "backend": name, "batch_size": batch_size, "threads": args.threads,
                    "tokens_per_s": tokens_per_s, "runs_tokens_per_s": runs,
                    "sentences": len(subset), "tokens": sum(map(len, subset)),
                    "flops_per_token": flops["flops_per_token"], "flops": flops, "gflops_per_s": round(gflops, 2),
                    "fraction_of_peak": round(gflops / peak_gflops, 4) if peak_gflops else None,
                    "model": source, "onnx_export": info if name == "onnx" else None,
                    "command": f"{PY} -m bench.families --only inference --families {family} --batch-sizes {batch_size}",
                })
                print(f"[bench] inference {family:15s} {name:5s} batch {batch_size:3d}: {tokens_per_s:9.0f} tokens/s",
                      file=sys.stderr)
        for name, backend in backends.items():
            lat = latency_20_tokens(Predictor(tagger, vocab, batch_size=1, backend=backend), sentences, args.latency_calls)
            latency.append({"family": family, "backend": name, "threads": args.threads, **lat})
    return rows, latency


def latency_20_tokens(predictor, sentences: list[list[str]], calls: int) -> dict[str, Any]:
    """In-process latency of one 20-token sentence per call (running EWT text cut into 20-token
    pieces): the model's share of the HTTP latency target."""
    words = [w for s in sentences for w in s]
    pieces = [words[i:i + 20] for i in range(0, min(len(words), 20 * calls) - 20 + 1, 20)]
    for piece in pieces[:20]:
        predictor.predict([piece])
    times = []
    for piece in pieces:
        started = time.perf_counter()
        predictor.predict([piece])
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"calls": len(times), "p50_ms": round(times[len(times) // 2], 3),
            "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))], 3), "max_ms": round(times[-1], 3)}


# -- 2. training -------------------------------------------------------------------------------
def train_command(family: str, run_dir: Path, args) -> list[str]:
    return [sys.executable, "-m", "tagger.train", "data=ud_ewt", f"model={family}", f"data_dir={args.data_dir}",
            "trainer.max_epochs=1", f"+trainer.limit_train_batches={args.train_batches}",
            "+trainer.limit_val_batches=2", "evaluate=false", f"threads={args.threads}",
            "~callbacks.progress_bar", "+trainer.enable_progress_bar=false", f"hydra.run.dir={run_dir}"]


def bench_training(args, work: Path) -> list[dict[str, Any]]:
    rows = []
    for family in args.families:
        run_dir = work / f"train_{family}"
        cmd = train_command(family, run_dir, args)
        started = time.perf_counter()
        r = subprocess.run(cmd, cwd=WORK, capture_output=True, text=True, timeout=args.train_timeout)
        if r.returncode != 0:
            raise RuntimeError(f"training {family} failed ({r.returncode}):\n{r.stderr[-3000:]}")
        m = json.loads((run_dir / "metrics.json").read_text())
        # no machine paths in the report: the corpus folder and the run dir are placeholders
        shown = [PY, *(a if not a.startswith("data_dir=") else "data_dir=DATA_DIR" for a in cmd[1:-1]),
                 "hydra.run.dir=RUN_DIR"]
        rows.append({
            "family": family, "threads": args.threads, "tokens_per_s": m["train_tokens_per_s"],
            "train_tokens": m["train_tokens"], "train_seconds": m["train_seconds"],
            "batches": m["global_steps"], "batch_size": m["config"]["data"]["batch_size"],
            "params": m["params"], "wall_seconds": round(time.perf_counter() - started, 1),
            "command": shlex.join(shown),
        })
        print(f"[bench] training  {family:15s} {m['train_tokens_per_s']:9.0f} tokens/s", file=sys.stderr)
    return rows


def comparison_training_speeds() -> list[dict[str, Any]]:
    """train_tokens_per_s of the finished comparison runs (1 thread each, two sweeps sharing the CPU)."""
    from tagger.artifacts.runs import comparison_runs

    out = []
    for m in [run / "metrics.json" for task in ("pos", "ner") for run in comparison_runs(task, WORK / "multirun")]:
        if not m.is_file():
            continue
        d = json.loads(m.read_text())
        out.append({"run": str(m.parent.relative_to(WORK)), "tokens_per_s": d.get("train_tokens_per_s"),
                    "threads": d.get("threads"), "command": d.get("command")})
    return out


# -- 3. HTTP -----------------------------------------------------------------------------------
def bench_http(args, work: Path, extra_roots: list[Path]) -> dict[str, Any]:
    from bench.loadgen import run_load

    family = "self_attention"
    run = trained_run(family, extra_roots)
    if run is None:
        raise RuntimeError("no trained self_attention run to serve (run the training section first)")
    sentences = load_sentences(args.data_dir)
    out: dict[str, Any] = {"model": str(run.relative_to(WORK) if run.is_relative_to(WORK) else run), "load": []}
    log_path = work / "service.log"
    from bench.loadgen import running_service

    with running_service(run, work, args.threads, log_path, access_log=True) as (base, pid, env):
        url = base + "/tag"
        serve = f"TAGGER_MODEL=tagger-bench:latest TAGGER_TORCH_THREADS={args.threads} bentoml serve serve.service:TaggingService"
        run_load(url, 4, min(5.0, args.http_duration), sentences)  # warm-up: first batches, allocator, keep-alive
        for per_request in args.http_sentences:
            for clients in args.clients:
                row = run_load(url, clients, args.http_duration, sentences, per_request, pid=pid)
                row["command"] = (f"{PY} -m bench.loadgen --url {base}/tag --clients {clients} "
                                  f"--duration {args.http_duration:g} --sentences {per_request}")
                out["load"].append(row)
                print(f"[bench] http {clients:2d} clients x {per_request:2d} sentences: {row['tokens_per_s']:8.0f} tokens/s "
                      f"p99 {row['p99_ms']} ms, {row['errors']} errors", file=sys.stderr)
        lat = run_load(url, 1, args.http_duration, sentences, 1, tokens=20)
        lat["command"] = f"{PY} -m bench.loadgen --url {base}/tag --clients 1 --duration {args.http_duration:g} --tokens 20"
        out["latency_20_tokens"] = lat
        print(f"[bench] http 1 client, 20-token sentences: p99 {lat['p99_ms']} ms", file=sys.stderr)
        soak = run_load(url, 32, args.soak_duration, sentences, 1, pid=pid)
        soak["command"] = (f"{PY} -m bench.loadgen --url {base}/tag --clients 32 --duration {args.soak_duration:g} "
                           f"--pid SERVER_PID --max-errors 0")
        out["soak"] = soak
        print(f"[bench] soak 32 clients {args.soak_duration:g} s: {soak['errors']} errors, memory "
              f"{soak.get('memory')}", file=sys.stderr)
        out["serve_command"] = serve
    from bench.loadgen import server_errors

    errors = server_errors(log_path)
    out["server_5xx"] = len(errors)
    out["server_5xx_sample"] = errors[:3]
    return out


# -- the report --------------------------------------------------------------------------------
TARGETS = (
    ("self_attention in-process, batch 256", ">= 30,000 tokens/s", 30_000.0),
    ("HTTP, 32 clients", ">= 10,000 tokens/s, 0 errors", 10_000.0),
    ("HTTP, 1 client, 20-token sentence", "p99 <= 50 ms", 50.0),
)


def check_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    inf = [r for r in results.get("inference", []) if r["family"] == "self_attention" and r["batch_size"] == 256]
    if inf:
        best = max(inf, key=lambda r: r["tokens_per_s"])
        out.append({"target": TARGETS[0][0], "goal": TARGETS[0][1], "measured": f"{best['tokens_per_s']:,.0f} ({best['backend']})",
                    "met": best["tokens_per_s"] >= TARGETS[0][2]})
    http = results.get("http") or {}
    rows32 = [r for r in http.get("load", []) if r["clients"] == 32]
    if rows32:
        best = max(rows32, key=lambda r: r["tokens_per_s"] or 0)
        out.append({"target": TARGETS[1][0], "goal": TARGETS[1][1],
                    "measured": f"{best['tokens_per_s']:,.0f} tokens/s ({best['sentences_per_request']} sentence(s)/request), "
                                f"{best['errors']} errors",
                    "met": (best["tokens_per_s"] or 0) >= TARGETS[1][2] and best["errors"] == 0})
    if http.get("latency_20_tokens"):
        p99 = http["latency_20_tokens"]["p99_ms"]
        out.append({"target": TARGETS[2][0], "goal": TARGETS[2][1], "measured": f"{p99} ms",
                    "met": p99 is not None and p99 <= TARGETS[2][2] and http["latency_20_tokens"]["errors"] == 0})
    if http.get("soak"):
        s = http["soak"]
        mem = s.get("memory") or {}
        out.append({"target": "soak: 32 clients, 60 s", "goal": "0 errors, memory stable",
                    "measured": f"{s['errors']} errors, RSS {mem.get('rss_after_warmup_mb')} -> {mem.get('rss_end_mb')} MB "
                                f"({mem.get('slope_mb_per_min')} MB/min)",
                    "met": s["errors"] == 0 and bool(mem.get("stable"))})
    return out


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def render(results: dict[str, Any]) -> str:
    cpu = results["cpu"]
    lines = ["# Benchmarks", "", f"Measured {results['date']} by `{results['command']}` on this machine "
             f"(torch {results['torch']}, onnxruntime {results.get('onnxruntime', '–')}).", "",
             f"- CPU: {cpu['model']}, {cpu['cores']} cores, {cpu['simd']}",
             f"- fp32 peak: **{cpu['peak_gflops']} GFLOP/s** = {cpu['assumption']}"]
    busy = [s for s in results["machine_state_samples"] if not s["quiet"]]
    if busy:
        lines += ["", f"> **The machine was not quiet** for {len(busy)} of {len(results['machine_state_samples'])} sections "
                  f"(CPU busy before a section up to {max((s.get('cpu_busy') or 0) for s in busy):.0%}, "
                  f"load average up to {max(s['loadavg_1m'] for s in busy)}, up to "
                  f"{max(s['other_training_processes'] for s in busy)} other `tagger.train` processes): these figures "
                  "are lower bounds; rerun `make bench-families` on an idle machine before quoting them."]
    if results.get("quick"):
        lines += ["", "> `--quick` run: every step shortened to seconds. A smoke test of the bench, not figures to quote."]
    if results.get("targets"):
        lines += ["", "## Targets", "", "| target | goal | measured | met |", "|---|---|---|---|"]
        lines += [f"| {t['target']} | {t['goal']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |"
                  for t in results["targets"]]
    if results.get("inference"):
        rows = results["inference"]
        lines += ["", "## 1. In-process inference", "",
                  f"`tagger.inference.predictor.Predictor` over the {max(r['tokens'] for r in rows):,}-token EWT test split (batch 1: "
                  f"the first {next((r['sentences'] for r in rows if r['batch_size'] == 1), '–')} sentences), "
                  f"{rows[0]['threads']} thread{'s' if rows[0]['threads'] > 1 else ''}, "
                  "median of the timed passes (backends taking turns) after two warm-up passes each. Backends: `torch` = the InferenceGraph in eager "
                  "PyTorch; `onnx` = the same graph exported by `tagger export`, run by ONNX Runtime. "
                  "FLOPs/token: `torch.utils.flop_counter.FlopCounterMode` over the same pass as the timing (same "
                  "sentences and batch size, length-sorted batches: the padding computed is included, so it grows with "
                  "the batch); attention counted on its reference path, LSTM added analytically (FlopCounterMode has no "
                  "formula for the fused CPU attention or LSTM kernels). % of peak = FLOPs/token x tokens/s / fp32 peak.", "",
                  "| model | backend | batch | tokens/s | FLOPs/token | GFLOP/s | % of peak | command |", "|---|---|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            lines.append(f"| {r['family']} | {r['backend']} | {r['batch_size']} | {_fmt(r['tokens_per_s'])} | "
                         f"{r['flops_per_token'] / 1e6:.2f} M | {r['gflops_per_s']:.1f} | "
                         f"{100 * (r['fraction_of_peak'] or 0):.1f}% | `{r['command']}` |")
        if results.get("inference_latency"):
            lines += ["", "In-process latency of one 20-token sentence per `predict` call (batch 1, "
                      f"{results['inference_latency'][0]['calls']} calls on running EWT test text): the model's share of the "
                      "HTTP latency target.", "", "| model | backend | p50 ms | p99 ms | max ms |", "|---|---|---:|---:|---:|"]
            lines += [f"| {r['family']} | {r['backend']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} |"
                      for r in results["inference_latency"]]
        sources = sorted({(r["family"], r["model"]) for r in rows})
        lines += ["", "Models: " + "; ".join(f"{f}: `{s}`" for f, s in sources) + "."]
    if results.get("training"):
        lines += ["", "## 2. Training", "",
                  "Training tokens/s as `tagger.train` measures it (forward + backward + optimiser step of the training "
                  "batches; validation excluded), one short epoch on EWT.", "",
                  "| model | tokens/s | threads | batches x size | params | command |", "|---|---:|---:|---|---:|---|"]
        for r in results["training"]:
            lines.append(f"| {r['family']} | {_fmt(r['tokens_per_s'])} | {r['threads']} | {r['batches']} x {r['batch_size']} | "
                         f"{_fmt(r['params'])} | `{r['command']}` |")
        if results.get("comparison_training"):
            lines += ["", "For reference, the comparison runs (1 thread each, two sweeps sharing the 2 cores):", "",
                      "| run | tokens/s | command |", "|---|---:|---|"]
            lines += [f"| {r['run']} | {_fmt(r['tokens_per_s'])} | `{r['command']}` |" for r in results["comparison_training"]]
    http = results.get("http")
    if http:
        lines += ["", "## 3. HTTP", "",
                  f"`{http['serve_command']}` serving `{http['model']}` on loopback; `bench.loadgen` closed-loop clients "
                  "(each sends the next request when the previous answer arrives) on the same 2 cores. Requests carry "
                  "EWT test sentences in corpus order; an answer is an error unless it is HTTP 200 with one tag per token.", "",
                  "| clients | sentences/request | requests/s | tokens/s | p50 ms | p95 ms | p99 ms | errors | command |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in http["load"] + [http["latency_20_tokens"]]:
            spr = r["sentences_per_request"] if r.get("tokens_per_sentence") != 20 else "1 (20 tokens)"
            lines.append(f"| {r['clients']} | {spr} | {_fmt(r['requests_per_s'], 1)} | {_fmt(r['tokens_per_s'])} | "
                         f"{r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['errors']} | `{r['command']}` |")
        s = http["soak"]
        mem = s.get("memory") or {}
        lines += ["", f"Soak: 32 clients for {s['duration_s']:.0f} s: {s['requests']:,} requests, {s['errors']} errors "
                  f"({s['error_kinds'] or 'none'}), p99 {s['p99_ms']} ms; server RSS (all processes) {mem.get('rss_start_mb')} MB at "
                  f"start, {mem.get('rss_after_warmup_mb')} MB after warm-up, {mem.get('rss_end_mb')} MB at the end "
                  f"(slope {mem.get('slope_mb_per_min')} MB/min): {'stable' if mem.get('stable') else '**growing**'}. "
                  f"`{s['command']}`",
                  "", f"Server access log: {http['server_5xx']} answers with status 5xx."]
        if http["server_5xx_sample"]:
            lines += ["", "```", *http["server_5xx_sample"], "```"]
    lines += ["", "## Reliability checks", "",
              "| check | command |", "|---|---|",
              "| property-based fuzzing of the service's OpenAPI (schemathesis): zero 5xx | `make fuzz` |",
              "| SIGKILL mid-epoch, resume from last.ckpt: same epochs, metrics within noise | `make kill-resume` (real data); `pytest tests/test_reliability.py` (tiny corpus) |",
              "| truncated/corrupted checkpoint, ONNX file or model-store entry: clear error | `pytest tests/test_reliability.py tests/inference/test_export.py` |",
              "| 32 clients for 60 s: zero errors, memory stable | `make soak` |",
              "| `trainer=ddp_cpu` (2 processes, gloo) matches 1 process | `pytest -m slow tests/test_ddp.py` |", ""]
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.families", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=["training", "inference", "http"],
                        help="run only these sections (repeatable; default: all)")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=list(BATCH_SIZES))
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TAGGER_DATA_DIR", "data")))
    parser.add_argument("--out", type=Path, default=WORK / "reports", help="writes bench_families.md and .json here")
    parser.add_argument("--quick", action="store_true", help="seconds per step: checks the bench runs, not figures")
    parser.add_argument("--fma-units", type=int, default=2, help="FMA units per core for the fp32 peak (default 2)")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir.resolve()
    quick = args.quick
    args.repeats = 1 if quick else 5
    args.batch1_sentences = 60 if quick else 500
    args.latency_calls = 50 if quick else 500
    args.train_batches = 5 if quick else 150
    args.train_timeout = 1800
    args.http_duration = 2.0 if quick else 30.0
    args.soak_duration = 3.0 if quick else 60.0
    args.clients = [1, 8, 32]
    args.http_sentences = [1] if quick else [1, 16]
    sections = args.only or ["training", "inference", "http"]
    if not (args.data_dir / "ud_english_ewt").is_dir():
        print(f"error: {args.data_dir}/ud_english_ewt not found (set --data-dir or TAGGER_DATA_DIR)", file=sys.stderr)
        return 1

    import onnxruntime

    cpu = cpu_info(args.fma_units)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": shlex.join(["python", "-m", "bench.families", *(argv or sys.argv[1:])]),
        "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "python": platform.python_version(),
        "cpu": cpu, "quick": quick, "machine_state_samples": [],  # one per section, taken just before it
    }
    out_json = args.out / "bench_families.json"
    if out_json.is_file():  # a partial rerun (--only) keeps the other sections' last figures
        previous = json.loads(out_json.read_text())
        owner = {"comparison_training": "training", "inference_latency": "inference"}
        for key in ("training", "comparison_training", "inference", "inference_latency", "http"):
            if key in previous and owner.get(key, key) not in sections:
                results[key] = previous[key]
    with tempfile.TemporaryDirectory(prefix="tagger-bench-") as tmp:
        work = Path(tmp)
        roots = [work]
        for section in ("training", "inference", "http"):
            if section not in sections:
                continue
            results["machine_state_samples"].append(machine_state() | {"section": section})
            if section == "training":
                results["training"] = bench_training(args, work)
                results["comparison_training"] = comparison_training_speeds()
            elif section == "inference":
                results["inference"], results["inference_latency"] = bench_inference(args, roots, cpu["peak_gflops"])
            else:
                results["http"] = bench_http(args, work, roots)
    results["targets"] = check_targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(out_json, json.dumps(results, indent=2))
    write_text(args.out / "bench_families.md", render(results))
    print(json.dumps({"report": str(args.out / "bench_families.md"), "targets": results["targets"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
