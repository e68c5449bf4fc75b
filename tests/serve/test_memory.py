"""serve.memory.HeapTrimmer: freed heap memory handed back at most once per interval."""
from __future__ import annotations

import sys

import pytest

from serve.memory import HeapTrimmer, glibc_trim


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trims_at_most_once_per_interval():
    clock, calls = Clock(), []
    trimmer = HeapTrimmer(0.5, trim=lambda: calls.append(clock.now), clock=clock)
    assert not trimmer.maybe_trim()  # no time has passed since it was made
    clock.now += 0.3
    assert not trimmer.maybe_trim()
    clock.now += 0.3
    assert trimmer.maybe_trim() and calls == [100.6]
    clock.now += 0.4
    assert not trimmer.maybe_trim()  # 0.4 s since the last trim
    clock.now += 0.1
    assert trimmer.maybe_trim() and calls == [100.6, 101.1] and trimmer.calls == 2


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_an_interval_of_zero_or_less_never_trims(interval):
    clock, calls = Clock(), []
    trimmer = HeapTrimmer(interval, trim=lambda: calls.append(1), clock=clock)
    clock.now += 10
    assert not trimmer.maybe_trim() and calls == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc is Linux's C library")
def test_glibc_trim_runs_here():
    trim = glibc_trim()
    assert trim is not None
    assert trim() in (0, 1)  # malloc_trim: 1 if memory was released, else 0
