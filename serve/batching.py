"""Greedy micro-batching: concurrent calls share one model pass, and a lone call never waits.

BentoML's adaptive batching (``batchable=True``) holds each request back for a wait it learns from
recent traffic. After a burst the learned wait stays high and decays only as new, equally delayed
requests are logged, so a lone client that follows a burst waits the burst's wait on every request.
The batcher here never waits on a clock: a call made while the model is idle runs at once; calls made
while it is busy queue up and all run together as soon as it is free. Under load that batches as much
as adaptive batching does; at low load it adds nothing (a lone client's latency: the one-client rows of
``reports/bench_families.md``).

The model runs in one dedicated thread, so two calls never run the model at the same time.
"""
from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Generic, Sequence, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class GreedyBatcher(Generic[In, Out]):
    """``await batcher(items)`` -> ``fn(items)``, merging the items of calls that arrive while ``fn``
    runs into one list (in arrival order, up to ``max_items`` per pass; a single call larger than
    that still runs whole). ``fn`` maps a list of items to one output per item."""

    def __init__(self, fn: Callable[[list[In]], Sequence[Out]], max_items: int = 256,
                 on_pass: Callable[[int], None] | None = None):
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.fn, self.max_items, self.on_pass = fn, max_items, on_pass  # on_pass(items in the pass)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tagger-model")
        self._queue: deque[tuple[list[In], asyncio.Future]] = deque()
        self._draining = False

    async def __call__(self, items: list[In]) -> list[Out]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((list(items), future))
        if not self._draining:
            self._draining = True
            loop.create_task(self._drain())
        return await future

    async def run_exclusive(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run another model call (attention weights, say) on the model thread, between passes."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _take(self) -> list[tuple[list[In], asyncio.Future]]:
        taken, size = [], 0
        while self._queue and (not taken or size + len(self._queue[0][0]) <= self.max_items):
            call = self._queue.popleft()
            if call[1].done():  # the caller went away (request cancelled) before its turn
                continue
            taken.append(call)
            size += len(call[0])
        return taken

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                calls = self._take()
                if not calls:
                    continue
                items = [item for call, _ in calls for item in call]
                if self.on_pass is not None:
                    self.on_pass(len(items))
                try:
                    outputs = await loop.run_in_executor(self.executor, self.fn, items)
                    if len(outputs) != len(items):
                        raise RuntimeError(f"batched function returned {len(outputs)} outputs for {len(items)} items")
                except Exception as e:  # every caller of this pass gets the error; the batcher goes on
                    for _, future in calls:
                        if not future.done():
                            future.set_exception(e)
                    continue
                start = 0
                for call, future in calls:
                    if not future.done():
                        future.set_result(list(outputs[start:start + len(call)]))
                    start += len(call)
        finally:
            self._draining = False
