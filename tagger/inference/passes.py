"""How the pieces of one predictor call are cut into forward passes.

A pass pads every piece to its longest one, and every pass also costs a fixed amount (its Python, the dispatch of
each op), whatever its size. :func:`plan_passes` sorts the pieces by length and cuts them where that is cheapest:
it minimises padded positions plus ``pass_cost`` positions per pass, by dynamic programming over the distinct
lengths. Greedy filling up to the token budget would pad a merged batch of 32 short and long sentences to its
longest one; here the short ones go in a pass of their own when the padding saved is worth more than a pass.
"""
from __future__ import annotations


def plan_passes(lengths: list[int], batch_size: int, max_tokens: int | None, pass_cost: int) -> list[list[int]]:
    """Indices of the pieces, shortest first, cut into passes of at most ``batch_size`` pieces and ``max_tokens``
    padded positions (pieces x longest piece; None: no limit), at the least padded positions plus ``pass_cost``
    per pass. A piece longer than ``max_tokens`` is a pass of its own."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    # runs of equal length in `order`: values[k] is the k-th distinct length, its pieces order[starts[k]:starts[k+1]]
    values: list[int] = []
    starts: list[int] = []
    for i, p in enumerate(order):
        if not values or lengths[p] != values[-1]:
            values.append(lengths[p])
            starts.append(i)
    starts.append(len(order))

    def capacity(length: int) -> int:  # pieces of this padded length one pass may hold
        return max(1, min(batch_size, max_tokens // max(1, length) if max_tokens else batch_size))

    # best[b]: the least cost of the pieces of the first b lengths; first[b]: where the last group of that plan begins.
    # A group of lengths a..b is padded to values[b-1] and cut into as many passes as its capacity needs.
    best, first = [0] * (len(values) + 1), [0] * (len(values) + 1)
    real = 0  # positions of the pieces of the first b lengths: every plan pays them
    for b in range(1, len(values) + 1):
        length, end = values[b - 1], starts[b]
        real += length * (end - starts[b - 1])
        cap, best[b], group = capacity(length), -1, 0
        for a in range(b, 0, -1):
            group += values[a - 1] * (starts[a] - starts[a - 1])  # real positions of lengths a..b
            count = end - starts[a - 1]
            waste = count * length - group
            if best[b] >= 0 and real + waste + pass_cost >= best[b]:
                break  # reaching further back only pads more: no cheaper plan starts before a
            cost = best[a - 1] + -(-count // cap) * pass_cost + count * length
            if best[b] < 0 or cost < best[b]:
                best[b], first[b] = cost, a
    passes: list[list[int]] = []
    b = len(values)
    while b:
        a = first[b]
        group = order[starts[a - 1]:starts[b]]
        n = -(-len(group) // capacity(values[b - 1]))
        size = -(-len(group) // n)  # n passes of nearly equal size
        passes[:0] = [group[i:i + size] for i in range(0, len(group), size)]
        b = a - 1
    return passes

