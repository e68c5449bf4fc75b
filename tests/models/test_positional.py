from __future__ import annotations

import math

import pytest
import torch

from tagger.models.positional import (LearnedPositions, PositionLimitError, RelativePositionBias,
                                      SinusoidalPositions)


def test_sinusoidal_values_at_known_positions():
    pe = SinusoidalPositions(4, heads=1, max_len=0, max_distance=0).absolute(3, torch.device("cpu"))
    # dims (0,1) use frequency 1, dims (2,3) frequency 1/10000^(2/4) = 0.01
    for pos in range(3):
        assert pe[pos, 0].item() == pytest.approx(math.sin(pos))
        assert pe[pos, 1].item() == pytest.approx(math.cos(pos))
        assert pe[pos, 2].item() == pytest.approx(math.sin(pos * 0.01))
        assert pe[pos, 3].item() == pytest.approx(math.cos(pos * 0.01))
    long = SinusoidalPositions(4, 1, 0, 0).absolute(5000, torch.device("cpu"))
    assert long.shape == (5000, 4) and torch.isfinite(long).all()


def test_learned_beyond_max_len_is_a_clear_error():
    pos = LearnedPositions(8, heads=1, max_len=10, max_distance=0)
    assert pos.absolute(10, torch.device("cpu")).shape == (10, 8)
    with pytest.raises(PositionLimitError, match=r"11 tokens.*model.max_len=10"):
        pos.absolute(11, torch.device("cpu"))


def test_relative_bias_is_a_function_of_clipped_distance_and_works_at_any_length():
    rel = RelativePositionBias(8, heads=2, max_len=0, max_distance=3)
    with torch.no_grad():
        rel.bias.weight.copy_(torch.arange(14, dtype=torch.float).view(7, 2))
    b = rel.relative_bias(50, torch.device("cpu"))  # far beyond any training length
    assert b.shape == (2, 50, 50)
    assert b[0, 10, 9] == b[0, 30, 29]  # same distance, same bias
    assert b[0, 10, 9] != b[0, 9, 10]  # direction matters
    assert b[1, 40, 0] == b[1, 40, 36]  # distances past the clip share the outermost bias


def test_alibi_starts_as_a_per_head_linear_distance_penalty_and_learns_direction():
    from tagger.models.positional import AlibiRelativeBias

    alibi = AlibiRelativeBias(8, heads=4, max_len=0, max_distance=3)
    b = alibi.relative_bias(40, torch.device("cpu"))  # (heads, T, T)
    slopes = [2.0 ** (-8.0 * (h + 1) / 4) for h in range(4)]
    for h, m in enumerate(slopes):
        assert b[h, 20, 20].item() == 0.0
        assert b[h, 20, 25].item() == pytest.approx(-5 * m) and b[h, 20, 15].item() == pytest.approx(-5 * m)
        assert b[h, 39, 0].item() == pytest.approx(-39 * m)  # keeps growing past max_distance: any length
    assert b[0, 20, 25] < b[3, 20, 25]  # the first head is the most local
    with torch.no_grad():
        alibi.bias.weight[alibi.max_distance + 1].fill_(1.0)  # learned bias for i - j = +1 only
    b = alibi.relative_bias(10, torch.device("cpu"))
    assert b[0, 5, 4] > b[0, 5, 6]  # the left neighbour now differs from the right one
