"""Training speed against a spaCy peer: ``python -m bench.training`` (``make bench-train``).

The default POS model (``python -m tagger.train experiment=pos``) and spaCy's efficiency tagger (``spacy init config
-p tagger -o efficiency``, the peer of :mod:`bench.backends`) each train on the UD English EWT train split, scored on
dev, in a fresh process with the same thread count, taking turns round by round (``--rounds``: ours then spaCy's,
then spaCy's then ours), so that both see the same machine.

- whole-fit tokens/s = epochs x train-split tokens / fit seconds, evaluation on dev included: ``fit_seconds`` of
  the run's ``metrics.json`` (``trainer.fit``) on our side; on spaCy's, from its "Training pipeline" line to its
  "Saved pipeline" line (its pipeline initialisation is outside, as building our vocabulary is);
- dev accuracy at each evaluation and the fit seconds at which it first reached ``--threshold``: ours from
  :class:`EpochClock`, a callback the bench adds to the run that writes each validation's metrics and time to
  ``epoch_clock.jsonl`` in the run dir; spaCy's from its log table, each line timed as it is printed.

spaCy trains as many epochs as our first run did (``training.max_epochs``; ``max_steps`` and ``patience`` off);
everything else is spaCy's efficiency config, evaluating every ``eval_frequency`` steps. Writes
``reports/bench_training.md`` and ``.json`` (``--out``) with the CPU, the load, every sample and the commands. The
bench measures; it asserts nothing about speed. ``--quick``: a few hundred sentences, two epochs a side (a smoke
test of the bench, not figures to quote).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytorch_lightning as pl  # noqa: E402

# the folder the bench runs from (the checkout, under make): tagger.train runs there, reports are written there
WORK = Path.cwd()
THRESHOLD = 94.3  # dev UPOS accuracy (%) whose first crossing is timed on both sides
THREADS = 1  # experiment=pos trains on one thread; thinc's CPU matmuls (cython-blis) run on one
EWT = "ud_english_ewt"
SPLITS = {"train": "en_ewt-ud-train.conllu", "dev": "en_ewt-ud-dev.conllu", "test": "en_ewt-ud-test.conllu"}
CLOCK_FILE = "epoch_clock.jsonl"
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # wasabi colours spaCy's messages even into a pipe
QUICK_SENTENCES = 300
QUICK_EVAL_FREQUENCY = 20  # spaCy steps between evaluations: about once an epoch of the quick corpus
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS")


class EpochClock(pl.Callback):
    """Appends one JSON line per validation (sanity check excluded) to ``RUN_DIR/epoch_clock.jsonl``: the epoch,
    the seconds since the fit started and the logged ``val/`` metrics."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.started = time.perf_counter()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.started = time.perf_counter()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        with self.path.open("a") as f:
            f.write(json.dumps({"epoch": trainer.current_epoch, "seconds": round(time.perf_counter() - self.started, 3),
                                **metrics}) + "\n")


# -- corpora -----------------------------------------------------------------------------------
def subset_corpus(data_dir: Path, out: Path, sentences: int) -> Path:
    """A data dir whose EWT splits are the first ``sentences`` sentences of each of ``data_dir``'s (whole blocks of
    lines, comments kept), for runs shorter than the whole corpus."""
    (out / EWT).mkdir(parents=True, exist_ok=True)
    for name in SPLITS.values():
        blocks = (data_dir / EWT / name).read_text(encoding="utf-8").split("\n\n")
        kept = [b for b in blocks if b.strip()][:sentences]
        (out / EWT / name).write_text("\n\n".join(kept) + "\n\n", encoding="utf-8")
    return out


def to_docbin(sentences: Iterable[dict[str, Any]], path: Path) -> int:
    """Sentences of the project's reader (``tokens``, ``tags``) as a spaCy DocBin at ``path``, the tag of each word in
    ``token.tag_``; -> the number of words."""
    from spacy.tokens import Doc, DocBin
    from spacy.vocab import Vocab

    vocab, docs, words = Vocab(), DocBin(attrs=["ORTH", "TAG"]), 0
    for sentence in sentences:
        docs.add(Doc(vocab, words=sentence["tokens"], tags=sentence["tags"]))
        words += len(sentence["tokens"])
    docs.to_disk(path)
    return words


def spacy_command(config: Path, output: Path, train: Path, dev: Path, epochs: int, seed: int,
                  eval_frequency: int | None = None) -> list[str]:
    """``spacy train`` of ``config`` (spaCy's efficiency tagger, as :func:`write_spacy_config` writes it) for
    ``epochs`` whole epochs on ``train`` (no step limit, no early stop), evaluated on ``dev`` every
    ``eval_frequency`` steps (default: the config's)."""
    overrides = {"paths.train": train, "paths.dev": dev, "training.max_epochs": epochs, "training.max_steps": 0,
                 "training.patience": 0, "system.seed": seed}
    if eval_frequency:
        overrides["training.eval_frequency"] = eval_frequency
    return [sys.executable, "-m", "spacy", "train", str(config), "--output", str(output),
            *(a for key, value in overrides.items() for a in (f"--{key}", str(value)))]


def write_spacy_config(path: Path) -> Path:
    """spaCy's efficiency tagger config (the peer of bench.backends) at ``path``."""
    from bench.backends import spacy_tagger_config

    spacy_tagger_config().to_disk(path)
    return path


# -- spaCy's log -------------------------------------------------------------------------------
def parse_spacy_log(lines: list[tuple[float, str]]) -> dict[str, Any]:
    """spaCy's training output, each line with the second it was read: -> ``fit_start`` (the "Training pipeline"
    line), ``fit_end`` (the "Saved pipeline" line), and ``evals``: one dict a row of the log table with the columns
    E, #, the losses, TAG_ACC and SCORE as numbers and ``at`` (the second the row was printed)."""
    header: list[str] | None = None
    out: dict[str, Any] = {"fit_start": None, "fit_end": None, "evals": []}
    for at, line in lines:
        text = ANSI.sub("", line).strip()
        if "Training pipeline" in text:
            out["fit_start"] = at
        elif "Saved pipeline" in text:
            out["fit_end"] = at
        elif text.startswith("E ") and "#" in text:
            header = re.split(r"\s{2,}", text)
        elif header and re.fullmatch(r"\d+\s+\d+(\s+[-\d.]+)+", text):
            values = text.split()
            if len(values) != len(header):
                raise ValueError(f"spaCy log row {text!r} has {len(values)} values for the columns {header}")
            row = {name: float(v) for name, v in zip(header, values)}
            row["E"], row["#"] = int(row["E"]), int(row["#"])
            out["evals"].append(row | {"at": at})
    return out


def timed_run(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[list[tuple[float, str]], float]:
    """Runs ``cmd`` with stdout and stderr merged, each line stamped with the seconds since the start; -> (lines,
    wall seconds). A failure raises with the command's last lines (all are kept in ``log``)."""
    started = time.perf_counter()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            lines.append((time.perf_counter() - started, line.rstrip("\n")))
    wall = time.perf_counter() - started
    log.write_text("\n".join(f"{t:9.3f} {line}" for t, line in lines) + "\n")
    if proc.returncode:
        tail = "\n".join(line for _, line in lines[-40:])
        raise RuntimeError(f"{shlex.join(cmd)} failed ({proc.returncode}; whole output in {log}):\n{tail}")
    return lines, wall


# -- the two sides -----------------------------------------------------------------------------
def whole_fit_rate(epochs: int, split_tokens: int, seconds: float) -> float:
    """Tokens (or words) per second over a whole fit: every epoch's pass over the train split, in the fit's wall
    time, evaluations included."""
    if epochs <= 0 or seconds <= 0:
        raise ValueError(f"a fit of {epochs} epochs in {seconds} s has no rate")
    return round(epochs * split_tokens / seconds, 1)


def first_reaching(evals: list[tuple[float, float]], threshold: float) -> float | None:
    """The first second (of ``(second, dev accuracy)`` pairs in time order) at which accuracy reached ``threshold``;
    None if it never did."""
    return next((round(at, 1) for at, acc in evals if acc >= threshold), None)


def thread_env(threads: int) -> dict[str, str]:
    """The environment of both sides' processes: every BLAS/OpenMP pool at ``threads``, output unbuffered (each
    line is timed as it is printed) and uncoloured."""
    return {**os.environ, **{v: str(threads) for v in THREAD_VARIABLES}, "PYTHONUNBUFFERED": "1",
            "ANSI_COLORS_DISABLED": "1"}


def ours_command(args, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "tagger.train", "experiment=pos", f"threads={args.threads}", f"seed={args.seed}",
            f"data_dir={args.corpus_dir}", "~callbacks.progress_bar", "+trainer.enable_progress_bar=false",
            "+callbacks.epoch_clock._target_=bench.training.EpochClock",
            f"+callbacks.epoch_clock.path=${{output_dir}}/{CLOCK_FILE}", *args.overrides, f"hydra.run.dir={run_dir}"]


def run_ours(args, run_dir: Path, split_tokens: int) -> dict[str, Any]:
    lines, wall = timed_run(ours_command(args, run_dir), thread_env(args.threads), WORK, run_dir.with_suffix(".log"))
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file():
        raise RuntimeError(f"{metrics_path} missing: the training wrote no metrics")
    m = json.loads(metrics_path.read_text())
    clock = [json.loads(line) for line in (run_dir / CLOCK_FILE).read_text().splitlines() if line.strip()]
    key = f"val/{m['main_metric']}"
    evals = [(row["seconds"], row[key]) for row in clock if key in row]
    return {"epochs": m["epochs"], "split_tokens": split_tokens, "trained_tokens": m["train_tokens"],
            "fit_seconds": m["fit_seconds"], "process_seconds": round(wall, 1),
            "tokens_per_s": whole_fit_rate(m["epochs"], split_tokens, m["fit_seconds"]),
            "train_tokens_per_s": m["train_tokens_per_s"], "evaluations": len(evals),
            "best_dev_acc": max((acc for _, acc in evals), default=None), "best_epoch": m.get("best_epoch"),
            "dev_acc_best_checkpoint": (m.get("dev") or {}).get(m["main_metric"]),
            "seconds_to_threshold": first_reaching(evals, args.threshold),
            "dev_curve": [[round(at, 1), round(acc, 2)] for at, acc in evals], "threads": m["threads"]}


def run_spacy(args, work: Path, out: Path, epochs: int, split_words: int) -> dict[str, Any]:
    cmd = spacy_command(work / "config.cfg", out, work / "train.spacy", work / "dev.spacy", epochs, args.seed,
                        args.eval_frequency)
    lines, wall = timed_run(cmd, thread_env(args.threads), work, out.with_suffix(".log"))
    log = parse_spacy_log(lines)
    if log["fit_start"] is None or log["fit_end"] is None or not log["evals"]:
        raise RuntimeError(f"{out.with_suffix('.log')}: no 'Training pipeline' / 'Saved pipeline' lines or no "
                           "evaluation rows in spaCy's output")
    fit = log["fit_end"] - log["fit_start"]
    evals = [(row["at"] - log["fit_start"], row["TAG_ACC"]) for row in log["evals"]]
    return {"epochs": epochs, "split_tokens": split_words, "fit_seconds": round(fit, 1),
            "process_seconds": round(wall, 1), "tokens_per_s": whole_fit_rate(epochs, split_words, fit),
            "steps": log["evals"][-1]["#"], "evaluations": len(evals),
            "best_dev_acc": max(acc for _, acc in evals), "seconds_to_threshold": first_reaching(evals, args.threshold),
            "dev_curve": [[round(at, 1), round(acc, 2)] for at, acc in evals]}


# -- the bench ---------------------------------------------------------------------------------
SIDES = {"ours": "POS self-attention (`experiment=pos`)", "spacy": "spaCy efficiency tagger"}


def summarise(samples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per side the medians over the rounds, and ours / spaCy of the whole-fit tokens/s."""
    def median(side: str, key: str) -> float | None:
        values = [s[key] for s in samples[side] if s.get(key) is not None]
        return statistics.median(values) if values else None

    sides = {side: {key: median(side, key) for key in ("tokens_per_s", "fit_seconds", "process_seconds",
                                                       "best_dev_acc", "seconds_to_threshold")}
             | {"epochs": samples[side][0]["epochs"], "split_tokens": samples[side][0]["split_tokens"],
                "evaluations": samples[side][0]["evaluations"]}
             for side in samples}
    return {"sides": sides, "ours_over_spacy": round(sides["ours"]["tokens_per_s"] / sides["spacy"]["tokens_per_s"], 2)}


def _fmt(x: Any, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def render(res: dict[str, Any]) -> str:
    """The report: both sides' medians, the ratio, the conditions and every sample, as Markdown."""
    cpu, summary, t = res["cpu"], res["summary"], res["threshold"]
    lines = ["# Training speed: the default POS model against spaCy's efficiency tagger (UD English EWT)", "",
             f"Measured {res['date']} by `{res['command']}`. CPU: {cpu['model']}, {cpu['cores']} cores, {cpu['simd']}; "
             f"{res['threads']} thread{'s' if res['threads'] > 1 else ''} a side ({', '.join(THREAD_VARIABLES)} = "
             f"{res['threads']} in both processes; ours also `threads={res['threads']}`, torch's intra-op pool); "
             f"{res['rounds']} round{'s' if res['rounds'] > 1 else ''}, the sides taking turns (ours first in odd rounds, "
             f"spaCy first in even ones), medians over the rounds; torch {res['versions']['torch']}, "
             f"spaCy {res['versions']['spacy']}, thinc {res['versions']['thinc']}.", ""]
    if res["quick"]:
        lines += [f"> **`--quick`: {res['sentences']} sentences per split and short fits. A smoke test of the bench, "
                  "not figures to quote.**", ""]
    elif res.get("sentences"):
        lines += [f"> The first {res['sentences']} sentences of each split, not the whole corpus.", ""]
    busy = [s for s in res["machine_state"] if not s["quiet"]]
    if busy:
        lines += [f"> **The machine was not quiet** before {len(busy)} of {len(res['machine_state'])} runs (CPU busy up to "
                  f"{max((s.get('cpu_busy') or 0) for s in busy):.0%}, load average up to "
                  f"{max(s['loadavg_1m'] for s in busy)}, up to {max(s['other_training_processes'] for s in busy)} other "
                  "`tagger.train` processes): rerun `make bench-train` on an idle machine before quoting these figures.", ""]
    lines += ["Whole-fit tokens/s = epochs x train-split tokens / fit seconds, the evaluations on dev included "
              "(ours: `fit_seconds` of `metrics.json`, `trainer.fit`; spaCy: its \"Training pipeline\" line to its "
              "\"Saved pipeline\" line). Dev accuracy: the best evaluation of the fit (ours: `val/acc` at each epoch's "
              "end; spaCy: TAG_ACC every `training.eval_frequency` steps). Seconds to the threshold: fit seconds at the "
              "end of the first evaluation that reached it.", "",
              f"| side | whole-fit tokens/s | epochs | train tokens | fit s | process s | evaluations | best dev acc | "
              f"s to dev acc >= {t} | command |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for side, name in SIDES.items():
        s = summary["sides"][side]
        lines.append(f"| {name} | {_fmt(s['tokens_per_s'])} | {s['epochs']} | {_fmt(s['split_tokens'])} | "
                     f"{_fmt(s['fit_seconds'], 1)} | {_fmt(s['process_seconds'], 1)} | {s['evaluations']} | "
                     f"{_fmt(s['best_dev_acc'], 2)} | {_fmt(s['seconds_to_threshold'], 1)} | `{res['commands'][side]}` |")
    lines += ["", f"Ours / spaCy, whole-fit tokens/s: **{summary['ours_over_spacy']:.2f}x**", "",
              "## Every run", "", "| round | side | whole-fit tokens/s | fit s | best dev acc | s to threshold | "
              "load average before |", "|---:|---|---:|---:|---:|---:|---:|"]
    for run in res["runs"]:
        lines.append(f"| {run['round']} | {run['side']} | {_fmt(run['tokens_per_s'])} | {_fmt(run['fit_seconds'], 1)} | "
                     f"{_fmt(run['best_dev_acc'], 2)} | {_fmt(run['seconds_to_threshold'], 1)} | "
                     f"{run['machine_state']['loadavg_1m']} |")
    mismatch = [r for r in res["runs"] if r["side"] == "ours" and r["trained_tokens"] != r["epochs"] * r["split_tokens"]]
    if mismatch:
        lines += ["", f"> Our training batches held {mismatch[0]['trained_tokens']:,} tokens, not epochs x split "
                  f"tokens ({mismatch[0]['epochs'] * mismatch[0]['split_tokens']:,}): an override limits the batches, "
                  "so the whole-fit figure overstates ours."]
    lines += ["", f"spaCy's config: {res['spacy_config']}. Its CPU ops (thinc's NumpyOps) multiply through cython-blis, "
              "which runs on one thread whatever the thread variables say.", ""]
    if res.get("note"):
        lines += [res["note"], ""]
    return "\n".join(lines)


PATH_OPTIONS = ("--data-dir", "--out", "--runs-dir")


def shown_command(argv: list[str]) -> str:
    """The bench's command line as the report shows it: the folders named by placeholders, not this machine's paths."""
    shown, hide = [], None
    for arg in argv:
        name, eq, _ = arg.partition("=")
        if hide:
            shown.append(hide)
        elif eq and name in PATH_OPTIONS:
            shown.append(f"{name}={name[2:].replace('-', '_').upper()}")
        else:
            shown.append(arg)
        hide = arg[2:].replace("-", "_").upper() if arg in PATH_OPTIONS else None
    return shlex.join(["python", "-m", "bench.training", *shown])


def main(argv: list[str] | None = None) -> int:
    from bench.backends import write_report
    from bench.families import cpu_info, machine_state
    from tagger.data.readers import read_conllu

    parser = argparse.ArgumentParser(prog="python -m bench.training", description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="more tagger.train overrides for our side, e.g. trainer.max_epochs=3")
    parser.add_argument("--rounds", type=int, default=1, help="trainings per side, taking turns")
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help="dev accuracy (%%) whose first crossing is timed")
    parser.add_argument("--sentences", type=int, help="train and score on the first N sentences of each split")
    parser.add_argument("--eval-frequency", type=int, help="spaCy's training.eval_frequency (default: its config's)")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TAGGER_DATA_DIR", "data")))
    parser.add_argument("--out", type=Path, default=Path("reports"), help="writes bench_training.md and .json here")
    parser.add_argument("--runs-dir", type=Path, help="keep both sides' run dirs and logs here (default: a temporary dir)")
    parser.add_argument("--note", help="a line for the report about the conditions")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_SENTENCES} sentences, 2 short epochs: checks the bench runs, not figures")
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences = args.sentences or QUICK_SENTENCES
        args.eval_frequency = args.eval_frequency or QUICK_EVAL_FREQUENCY
        args.overrides = ["trainer.max_epochs=2", *args.overrides]
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    for name in SPLITS.values():
        if not (args.data_dir / EWT / name).is_file():
            parser.error(f"{args.data_dir / EWT / name} not found (--data-dir or TAGGER_DATA_DIR names the corpora)")

    import spacy
    import thinc
    import torch

    with tempfile.TemporaryDirectory(prefix="tagger-bench-train-") as tmp:
        work = (args.runs_dir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        data_dir = args.data_dir.resolve()
        args.corpus_dir = subset_corpus(data_dir, work / "data", args.sentences) if args.sentences else data_dir
        train = read_conllu(args.corpus_dir / EWT / SPLITS["train"])
        split_tokens = to_docbin(train, work / "train.spacy")
        to_docbin(read_conllu(args.corpus_dir / EWT / SPLITS["dev"]), work / "dev.spacy")
        write_spacy_config(work / "config.cfg")
        runs: list[dict[str, Any]] = []
        epochs = None
        for r in range(args.rounds):
            for side in ("ours", "spacy") if r % 2 == 0 else ("spacy", "ours"):
                state = machine_state()
                out = work / f"{side}{r + 1}"
                if side == "ours":
                    sample = run_ours(args, out, split_tokens)
                    epochs = epochs or sample["epochs"]
                else:
                    sample = run_spacy(args, work, out, epochs, split_tokens)
                runs.append({"round": r + 1, "side": side, **sample, "machine_state": state})
                print(f"[bench] round {r + 1} {side:5s}: {sample['tokens_per_s']:9.0f} tokens/s over the fit "
                      f"({sample['epochs']} epochs, {sample['fit_seconds']} s), best dev {_fmt(sample['best_dev_acc'], 2)}",
                      file=sys.stderr)
    samples = {side: [r for r in runs if r["side"] == side] for side in SIDES}
    shown = argparse.Namespace(**{**vars(args), "corpus_dir": "DATA_DIR"})
    spacy_shown = spacy_command(Path("config.cfg"), Path("OUT"), Path("train.spacy"), Path("dev.spacy"), epochs,
                                args.seed, args.eval_frequency)
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": shown_command(sys.argv[1:] if argv is None else argv),
        "cpu": cpu_info(), "threads": args.threads, "rounds": args.rounds, "seed": args.seed, "quick": args.quick,
        "sentences": args.sentences, "threshold": args.threshold, "note": args.note,
        "versions": {"torch": torch.__version__, "spacy": spacy.__version__, "thinc": thinc.__version__},
        "commands": {"ours": shlex.join(["python", *ours_command(shown, Path("RUN_DIR"))[1:]]),
                     "spacy": shlex.join(["python", *spacy_shown[1:]])},
        "spacy_config": "`python -m spacy init config -p tagger -o efficiency -l en config.cfg` (tok2vec + tagger); "
                        "train.spacy / dev.spacy: the EWT splits read by `tagger.data.readers.read_conllu`, one Doc "
                        "of gold words a sentence, UPOS in `token.tag_`",
        "machine_state": [r["machine_state"] for r in runs],
        "summary": summarise(samples), "runs": runs,
    }
    write_report(args.out, "bench_training", results, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
