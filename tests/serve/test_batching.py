"""GreedyBatcher: a lone call runs at once; calls made while the model is busy share one pass."""
from __future__ import annotations

import asyncio
import threading

import pytest

from serve.batching import GreedyBatcher


class Model:
    """Records each pass; blocks in the pass while ``gate`` is clear (a slow model)."""

    def __init__(self) -> None:
        self.passes: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.threads: set[str] = set()

    def __call__(self, items: list[str]) -> list[str]:
        self.passes.append(list(items))
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        self.gate.wait(5)
        if "boom" in items:
            raise ValueError("bad item")
        return [x.upper() for x in items]


def queued_while_busy(model: Model, max_items: int, queued: list[list[str]], first: list[str]):
    """Start a pass on ``first`` that blocks, make the ``queued`` calls while it runs, release it;
    -> (first's answer, the queued calls' answers or exceptions, in order)."""
    async def main():
        b = GreedyBatcher(model, max_items=max_items)
        model.gate.clear()
        head = asyncio.create_task(b(first))
        await asyncio.to_thread(model.entered.wait, 5)  # the first pass is running, blocked
        rest = [asyncio.create_task(b(items)) for items in queued]
        await asyncio.sleep(0.01)
        model.gate.set()
        return await head, await asyncio.gather(*rest, return_exceptions=True)

    return asyncio.run(main())


def test_lone_calls_each_run_at_once_as_their_own_pass():
    model = Model()

    async def main():
        b = GreedyBatcher(model)
        return [await b(["a", "b"]), await b(["c"])]

    assert asyncio.run(main()) == [["A", "B"], ["C"]]
    assert model.passes == [["a", "b"], ["c"]]


def test_calls_made_while_the_model_runs_share_the_next_pass_in_order():
    model = Model()
    first, rest = queued_while_busy(model, 10, [[f"{i}a", f"{i}b"] for i in range(3)], first=["x"])
    assert first == ["X"]
    assert rest == [["0A", "0B"], ["1A", "1B"], ["2A", "2B"]]
    assert model.passes == [["x"], ["0a", "0b", "1a", "1b", "2a", "2b"]]
    assert len(model.threads) == 1  # one model thread


def test_max_items_splits_queued_calls_but_never_a_single_call():
    model = Model()
    first, rest = queued_while_busy(model, 3, [["a", "b"], ["c", "d"], ["e", "f", "g", "h"]], first=["w"])
    assert first == ["W"]
    assert rest == [["A", "B"], ["C", "D"], ["E", "F", "G", "H"]]
    assert model.passes == [["w"], ["a", "b"], ["c", "d"], ["e", "f", "g", "h"]]


def test_an_error_reaches_every_caller_of_that_pass_and_the_batcher_goes_on():
    model = Model()
    first, (boom, fine, later_in_queue) = queued_while_busy(model, 2, [["boom"], ["fine"], ["later"]], first=["ok"])
    assert first == ["OK"]
    assert isinstance(boom, ValueError) and isinstance(fine, ValueError)  # same pass, same error
    assert later_in_queue == ["LATER"]  # the next pass runs as usual
    assert model.passes == [["ok"], ["boom", "fine"], ["later"]]


def test_a_cancelled_caller_is_skipped():
    model = Model()

    async def main():
        b = GreedyBatcher(model)
        model.gate.clear()
        first = asyncio.create_task(b(["a"]))
        await asyncio.to_thread(model.entered.wait, 5)
        gone = asyncio.create_task(b(["gone"]))
        kept = asyncio.create_task(b(["kept"]))
        await asyncio.sleep(0.01)
        gone.cancel()
        model.gate.set()
        return await first, await kept

    assert asyncio.run(main()) == (["A"], ["KEPT"])
    assert model.passes == [["a"], ["kept"]]


def test_wrong_number_of_outputs_is_an_error_not_a_misaligned_answer():
    async def main():
        return await GreedyBatcher(lambda items: items[:-1])(["a", "b"])

    with pytest.raises(RuntimeError, match="1 outputs for 2 items"):
        asyncio.run(main())


def test_max_items_must_be_positive():
    with pytest.raises(ValueError, match="max_items"):
        GreedyBatcher(lambda items: items, max_items=0)
