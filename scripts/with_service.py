"""Serve a trained run on a free loopback port, run a command against it, stop the service.

    python scripts/with_service.py [--run RUN_DIR] -- COMMAND...

The run is packaged into a private BentoML store (a temporary BENTOML_HOME) and served by
``bentoml serve serve.service:TaggingService``; COMMAND runs through ``bash -c`` with ``TAGGER_URL``
(e.g. http://127.0.0.1:41234) and ``TAGGER_PID`` (the server's process group leader) set.
Exits with COMMAND's status. Without ``--run``: a self-attention comparison run, else the best
run ``tagger.artifacts.package --best`` would pick. ``make fuzz`` and ``make soak`` use it.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.loadgen import running_service, server_errors  # noqa: E402


def default_run() -> Path:
    from tagger.artifacts.runs import comparison_runs, find_best, is_trained

    multirun = REPO / "multirun"
    for runs in (comparison_runs("pos", multirun, "self_attention"), comparison_runs("pos", multirun),
                 comparison_runs("ner", multirun)):
        for run in runs:
            if is_trained(run):
                return run

    best = find_best("pos")
    if best is None:
        raise SystemExit("no trained run found: train one (make train) or pass --run RUN_DIR")
    return Path(best)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="run dir to serve (default: see above)")
    parser.add_argument("--threads", type=int, default=2, help="TAGGER_TORCH_THREADS of the service")
    parser.add_argument("--fail-on-5xx", action="store_true",
                        help="exit 1 if the service answered any request with 5xx (it then keeps an access log)")
    parser.add_argument("command", nargs="+", help="command to run against the service (after --)")
    args = parser.parse_args(argv)
    run = (args.run or default_run()).resolve()
    with tempfile.TemporaryDirectory(prefix="tagger-service-") as tmp:
        work = Path(tmp)
        log = work / "service.log"
        print(f"[with_service] serving {run}", file=sys.stderr)
        with running_service(run, work, args.threads, log, access_log=args.fail_on_5xx) as (base, pid, env):
            env = {**env, "TAGGER_URL": base, "TAGGER_PID": str(pid)}
            cmd = " ".join(args.command) if len(args.command) > 1 else args.command[0]
            print(f"[with_service] {base}: {cmd}", file=sys.stderr)
            code = subprocess.run(["bash", "-c", cmd], cwd=REPO, env=env).returncode
        answers = server_errors(log) if args.fail_on_5xx else []  # only then does the service keep an access log
        if answers:
            print(f"[with_service] the service answered {len(answers)} requests with 5xx, e.g.:\n  "
                  + "\n  ".join(answers[:3]), file=sys.stderr)
            code = code or 1
    return code


if __name__ == "__main__":
    sys.exit(main())
