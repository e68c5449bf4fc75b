"""Give freed heap memory back to the operating system, at most once per interval.

A model pass allocates tensors whose sizes follow the requests it merges. glibc's allocator keeps what they free on
its heaps for reuse, and with sizes that change from pass to pass the heaps fragment, so a busy worker's RSS keeps
growing. ``malloc_trim(0)`` hands the free pages back. Not after every pass: the pages handed back are faulted in again
by the next passes, which costs tokens per second, so the trim waits an interval (``TAGGER_TRIM_INTERVAL``, 2 s by
default, long enough that the cost does not show). A fixed ``M_MMAP_THRESHOLD`` holds memory down too, but costs far
more requests per second. The figures: docs/reference.md, "Settings".

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
