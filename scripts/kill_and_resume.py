"""Kill a training with SIGKILL mid-epoch, resume it from ``last.ckpt``, compare with an uninterrupted run.

    python scripts/kill_and_resume.py --out DIR [--kill-at 0.4] [--tolerance 1.0] -- TRAIN_OVERRIDES...

1. the uninterrupted run: ``python -m tagger.train TRAIN_OVERRIDES hydra.run.dir=DIR/uninterrupted``;
2. the same command into DIR/killed, SIGKILLed ``--kill-at`` of an epoch (timed on run 1) after its first
   ``last.ckpt`` appears, i.e. in the middle of the second epoch;
3. every ``*.ckpt`` left behind must load (``torch.load(weights_only=True)`` via
   ``tagger.artifacts.checkpoint.read_checkpoint``): AtomicCheckpointIO never leaves a half-written one;
4. resume: the same command with ``ckpt_path=DIR/killed/checkpoints/last.ckpt``;
5. the resumed run must finish with the same epoch and step counts as run 1, and dev/test main metrics
   within ``--tolerance`` points (dropout draws after the resume differ, so "within noise", not equal).

Writes DIR/kill_resume.json; exits 1 if a check fails. ``make kill-resume`` runs it on EWT;
``tests/test_reliability.py`` on the tiny test corpus.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def train_cmd(overrides: list[str], run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tagger.train", *overrides, f"hydra.run.dir={run_dir}", *extra]


def run(cmd: list[str], log: Path, timeout: float) -> None:
    with open(log, "w") as f:
        r = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}); see {log}")


def kill_mid_epoch(cmd: list[str], run_dir: Path, log: Path, epoch_seconds: float, kill_at: float,
                   timeout: float) -> dict:
    """Start ``cmd``, wait for its first last.ckpt, wait ``kill_at`` of an epoch more, SIGKILL it."""
    last = run_dir / "checkpoints" / "last.ckpt"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while not last.exists():
        if proc.poll() is not None:
            raise SystemExit(f"the run ended ({proc.returncode}) before writing {last}; see {log}")
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"no {last} after {timeout:.0f} s")
        time.sleep(0.01)
    appeared = time.monotonic()
    time.sleep(kill_at * epoch_seconds)
    finished_first = proc.poll() is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return {"killed_after_s": round(time.monotonic() - appeared, 3), "returncode": proc.returncode,
            "finished_before_kill": finished_first}


def checkpoint_audit(ckpt_dir: Path) -> dict:
    """Every *.ckpt loads with weights_only=True and is a tagger checkpoint; temp files are listed."""
    from tagger.artifacts.checkpoint import CheckpointError, read_checkpoint

    out = {"loadable": {}, "unloadable": {}, "temp_files": sorted(p.name for p in ckpt_dir.glob(".*.tmp"))}
    for p in sorted(ckpt_dir.glob("*.ckpt")):
        try:
            ckpt = read_checkpoint(p)
            out["loadable"][p.name] = {"epoch": ckpt.get("epoch"), "global_step": ckpt.get("global_step")}
        except CheckpointError as e:
            out["unloadable"][p.name] = str(e)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the two run dirs and kill_resume.json")
    parser.add_argument("--kill-at", type=float, default=0.4, help="fraction of an epoch after the first checkpoint")
    parser.add_argument("--tolerance", type=float, default=1.0, help="max |metric difference|, points")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per training")
    parser.add_argument("overrides", nargs="*", help="python -m tagger.train overrides (after --)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    ref_dir, run_dir = out / "uninterrupted", out / "killed"

    run(train_cmd(args.overrides, ref_dir), out / "uninterrupted.log", args.timeout)
    ref = json.loads((ref_dir / "metrics.json").read_text())
    if ref["epochs"] < 2:
        raise SystemExit("need at least 2 epochs (trainer.max_epochs) to kill one in the middle")
    epoch_seconds = ref["fit_seconds"] / ref["epochs"]

    kill = kill_mid_epoch(train_cmd(args.overrides, run_dir), run_dir, out / "killed.log", epoch_seconds,
                          args.kill_at, args.timeout)
    audit = checkpoint_audit(run_dir / "checkpoints")
    killed_in_epoch = audit["loadable"].get("last.ckpt", {}).get("epoch")
    run(train_cmd(args.overrides, run_dir, f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}"),
        out / "resumed.log", args.timeout)
    resumed = json.loads((run_dir / "metrics.json").read_text())

    metric = ref["main_metric"]
    diffs = {split: round(resumed[split][metric] - ref[split][metric], 3)
             for split in ("dev", "test") if split in ref and split in resumed}
    checks = {
        "killed_by_sigkill": kill["returncode"] == -signal.SIGKILL and not kill["finished_before_kill"],
        "killed_mid_run": killed_in_epoch is not None and killed_in_epoch + 1 < ref["epochs"],
        "every_ckpt_loads": not audit["unloadable"] and "last.ckpt" in audit["loadable"],
        "same_epochs": resumed["epochs"] == ref["epochs"],
        "same_global_steps": resumed["global_steps"] == ref["global_steps"],
        "metrics_within_tolerance": all(abs(d) <= args.tolerance for d in diffs.values()),
    }
    report = {
        "command": train_cmd(args.overrides, Path("RUN_DIR"))[1:], "kill": kill, "checkpoints_after_kill": audit,
        # the checkpoint holds the last finished epoch; the kill came during the next one
        "killed_during_epoch": None if killed_in_epoch is None else killed_in_epoch + 1,
        "uninterrupted": {k: ref.get(k) for k in ("epochs", "global_steps", "fit_seconds")} |
        {s: ref[s][metric] for s in diffs},
        "resumed": {k: resumed.get(k) for k in ("epochs", "global_steps")} | {s: resumed[s][metric] for s in diffs},
        "metric": metric, "difference": diffs, "tolerance": args.tolerance, "checks": checks,
        "passed": all(checks.values()),
    }
    (out / "kill_resume.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
