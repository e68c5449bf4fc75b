"""Forward passes on several threads at once, each thread with its own share of torch's intra-op threads.

The ops of one pass of a small tagger are too small to keep several intra-op threads busy: at the end of each op
torch waits for the slowest thread. Passes side by side, one thread each, keep the cores busy instead, and a pass's
Python work (word ids, ``tolist``) runs while the other thread is in a matrix product, since torch releases the GIL
there. ``reports/bench.md`` measures both ways on the same cores.

Under OpenMP (torch's CPU builds) the intra-op thread count is per thread: each pass thread sets its own, and
the process-wide count that threads started later take is put back once every pass thread has set its own. A
build where the count is not per thread is caught when the threads start (:class:`PassThreadsError`; a
:class:`tagger.inference.predictor.Predictor` then runs its passes one after another and says so in the log).
Threads do not survive a fork: a forked child starts threads of its own on its first :meth:`PassThreads.map`.

Hand-written as a thin layer over ``concurrent.futures``: what the pool lacks is the per-thread intra-op count and
inference mode in its threads.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

import torch

In = TypeVar("In")
Out = TypeVar("Out")

START_TIMEOUT = 60.0  # seconds for the pass threads to start


class PassThreadsError(RuntimeError):
    """The pass threads could not be given their own intra-op thread count."""


class PassThreads:
    """``count`` threads, each running torch with ``threads_each`` intra-op threads (default: torch's current count
    shared out, at least one each); :meth:`map` runs a function over items on them."""

    def __init__(self, count: int, threads_each: int | None = None):
        if count < 1:
            raise ValueError(f"need streams >= 1, got {count}")
        self.count, self.threads_each = count, threads_each or max(1, torch.get_num_threads() // count)
        self._start()

    def _start(self) -> None:
        keep, count = torch.get_num_threads(), self.count
        self.pid = os.getpid()  # a forked child has none of these threads: map starts them again there
        self.pool = ThreadPoolExecutor(count, thread_name_prefix="tagger-pass")
        seen: list[int] = []
        set_all, restored = (threading.Barrier(count + 1, timeout=START_TIMEOUT) for _ in range(2))

        def start() -> None:  # one per thread: the barrier keeps each thread on one call until all have started
            torch.set_num_threads(self.threads_each)
            torch.get_num_threads()  # torch sets a thread's count up on its first read: from the value set now
            set_all.wait()
            restored.wait()
            seen.append(torch.get_num_threads())

        calls = [self.pool.submit(start) for _ in range(count)]
        set_all.wait()
        torch.set_num_threads(keep)  # the count of this thread and of threads started later
        restored.wait()
        for call in calls:
            call.result()
        if seen != [self.threads_each] * count or torch.get_num_threads() != keep:
            self.pool.shutdown()
            raise PassThreadsError(f"this torch build shares one intra-op thread count between threads "
                                   f"({torch.__config__.parallel_info().splitlines()[2].strip()}): pass threads read "
                                   f"{seen}, expected {self.threads_each}")

    def map(self, fn: Callable[[In], Out], items: Iterable[In]) -> list[Out]:
        """``[fn(item) for item in items]``, computed on the pass threads in inference mode."""
        def run(item: In) -> Out:
            with torch.inference_mode():
                return fn(item)

        if os.getpid() != self.pid:
            self._start()
        return list(self.pool.map(run, items))
