"""How many torch threads a training uses: the ``threads`` config value, a number, ``auto`` or null."""
from __future__ import annotations

import os
from typing import Any

import psutil


def is_training(argv: list[str]) -> bool:
    """Whether a process's command line is a training: ``python -m tagger.train ...`` or ``tagger train ...``."""
    return argv[1:3] == ["-m", "tagger.train"] or (len(argv) > 2 and argv[1].endswith("/tagger") and argv[2] == "train")


def running_trainings(exclude: int | None = None) -> int:
    """Training processes on this machine that run (a stopped one shares no CPU), less the process ``exclude``."""
    count = 0
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["pid"] == exclude or not is_training(proc.info["cmdline"] or []):
            continue
        if proc.info["status"] not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
            count += 1
    return count


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def training_threads(value: Any) -> int | None:
    """The ``threads`` config value as a thread count: an integer >= 1 as it is; ``auto``, the usable cores shared
    evenly with the other trainings running when this one starts (a lone training gets every core); null, torch's
    own default (None)."""
    if value is None:
        return None
    if value == "auto":
        return max(1, usable_cores() // (1 + running_trainings(exclude=os.getpid())))
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"threads must be an integer >= 1, auto or null, got {value!r}")
    return value
