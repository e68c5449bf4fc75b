"""Give freed heap memory back to the operating system, at most once per interval.

A model pass allocates tensors whose sizes follow the requests it merges. glibc's allocator keeps what they free on
its heaps for reuse, and with sizes that change from pass to pass the heaps fragment: under 32 clients × 1 sentence
the service's RSS rose from ~510 to ~835 MB in 150 s and was still rising. ``malloc_trim(0)`` hands the free pages
back. Every 2 s (the service's default, ``TAGGER_TRIM_INTERVAL``) it held RSS under ~630 MB over 90 s at the same
requests per second; every 0.5 s cost 6-18% of the tokens per second under 32 clients × 16 sentences (pages handed
back are faulted in again), every 2 s nothing measurable. A fixed ``M_MMAP_THRESHOLD`` of 128 KB held RSS at ~530 MB
too, but cost ~30% of the requests per second.

Hand-written because no library does this: it is one glibc call behind a clock.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import time
from typing import Callable


def glibc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)`` (pad 0: release every free page it can), or None where the C library is not
    glibc (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        malloc_trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    return None if malloc_trim is None else (lambda: malloc_trim(0))


class HeapTrimmer:
    """``maybe_trim()`` after each pass: calls ``trim`` (default :func:`glibc_trim`) when at least ``interval``
    seconds have passed since the last call; never where ``interval`` <= 0 or there is no trim function."""

    def __init__(self, interval: float, trim: Callable[[], object] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.interval, self.clock = interval, clock
        self.trim = trim if trim is not None else glibc_trim()
        self.last = clock()
        self.calls = 0

    def maybe_trim(self) -> bool:
        """Whether it trimmed now."""
        if self.interval <= 0 or self.trim is None or self.clock() - self.last < self.interval:
            return False
        self.trim()
        self.last, self.calls = self.clock(), self.calls + 1
        return True
