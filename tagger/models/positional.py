"""Positional encodings for the self-attention encoder, chosen by ``model.pos_encoding``.

Each encoding answers two questions: an absolute vector per position (``absolute``), combined with
the token vectors by ``model.pos_combine`` (add or concat), and/or a bias on the attention scores
from the relative distance i-j (``relative_bias``). ``none`` answers neither: the encoder is then
permutation-equivariant, which is why positional encodings exist.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


class PositionLimitError(ValueError):
    """An input is longer than a learned position table."""


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, heads: int, max_len: int, max_distance: int):
        super().__init__()
        self.d_model, self.heads, self.max_len, self.max_distance = d_model, heads, max_len, max_distance

    def absolute(self, T: int, device: torch.device) -> torch.Tensor | None:
        """(T, d_model) vectors for positions 0..T-1, or None."""
        return None

    def relative_bias(self, T: int, device: torch.device) -> torch.Tensor | None:
        """(heads, T, T) additive score bias, or None."""
        return None


class NoPositions(PositionalEncoding):
    pass


class SinusoidalPositions(PositionalEncoding):
    """Fixed sin/cos of geometric wavelengths (Vaswani et al. 2017); defined at any length."""

    def absolute(self, T: int, device: torch.device) -> torch.Tensor:
        pos = torch.arange(T, device=device, dtype=torch.float).unsqueeze(1)  # (T,1)
        freq = torch.exp(torch.arange(0, self.d_model, 2, device=device, dtype=torch.float)
                         * (-math.log(10000.0) / self.d_model))  # (d/2,)
        pe = torch.zeros(T, self.d_model, device=device)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq[: self.d_model // 2])
        return pe  # (T,d)


class LearnedPositions(PositionalEncoding):
    """A trained vector per position up to ``max_len``; longer inputs are refused, not clipped."""

    def __init__(self, d_model: int, heads: int, max_len: int, max_distance: int):
        super().__init__(d_model, heads, max_len, max_distance)
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def absolute(self, T: int, device: torch.device) -> torch.Tensor:
        if T > self.max_len:
            raise PositionLimitError(
                f"input has {T} tokens but the learned position table holds model.max_len={self.max_len}; "
                "split the input into windows of at most max_len tokens (the service does), or use "
                "model.pos_encoding=sinusoidal|relative which work at any length"
            )
        return self.table.weight[:T]  # (T,d)


class RelativePositionBias(PositionalEncoding):
    """A learned per-head bias for each signed distance i-j, clipped to ±max_distance (Shaw et al.
    2018; T5). Works at any length: distances past the clip share the outermost bias."""

    def __init__(self, d_model: int, heads: int, max_len: int, max_distance: int):
        super().__init__(d_model, heads, max_len, max_distance)
        self.bias = nn.Embedding(2 * max_distance + 1, heads)
        nn.init.zeros_(self.bias.weight)

    def relative_bias(self, T: int, device: torch.device) -> torch.Tensor:
        i = torch.arange(T, device=device)
        dist = (i[:, None] - i[None, :]).clamp(-self.max_distance, self.max_distance) + self.max_distance  # (T,T)
        return self.bias(dist).permute(2, 0, 1)  # (heads,T,T)


class AlibiRelativeBias(RelativePositionBias):
    """ALiBi's fixed per-head distance penalty −m_h·|i−j| (Press et al. 2022; slopes m_h = 2^(−8h/H))
    plus the learned, direction-aware bias of :class:`RelativePositionBias` (zero at the start).

    The fixed part is a locality prior from the first step (steep heads look at neighbours, flat heads
    at the whole sentence) and keeps growing linearly past any training length; the learned part tells
    left from right, which a symmetric penalty cannot."""

    def __init__(self, d_model: int, heads: int, max_len: int, max_distance: int):
        super().__init__(d_model, heads, max_len, max_distance)
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])
        self.register_buffer("slopes", slopes, persistent=False)  # (heads,), a constant of `heads`

    def relative_bias(self, T: int, device: torch.device) -> torch.Tensor:
        i = torch.arange(T, device=device)
        distance = (i[:, None] - i[None, :]).abs().float()  # (T,T)
        return super().relative_bias(T, device) - self.slopes.to(device)[:, None, None] * distance  # (heads,T,T)


POSITIONAL: dict[str, type[PositionalEncoding]] = {
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "relative": RelativePositionBias,
    "alibi": AlibiRelativeBias,
    "none": NoPositions,
}
