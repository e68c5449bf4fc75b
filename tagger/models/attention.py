"""Multi-head self-attention written out: q/k/v projections, a swappable score function,
scores -> mask -> softmax -> dropout -> weights·V, heads concatenated and mixed by W_O.

A fast path serves the dot-product scores when the weights are not asked for: the additive mask built
in one pass, then ``F.scaled_dot_product_attention`` (torch's fused kernel), or at inference on inputs of
at most ``GEMM_MAX_LEN`` tokens two batched GEMMs around a softmax, faster there on CPU;
``tests/models/test_attention.py`` checks both equal the reference path.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ScaledDotScore(nn.Module):
    """Multiplicative attention q·k/√d (Vaswani et al. 2017)."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim**-0.5

    @property
    def fused_scale(self) -> float | None:  # the scale the fused kernel must use; None = not fusable
        return self.scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q (B,h,T,d), k (B,h,S,d) -> unnormalised scores (B,h,T,S)."""
        return (q @ k.transpose(-2, -1)) * self.scale


class DotScore(ScaledDotScore):
    """Unscaled q·k: sharper attention, which TENER (Yan et al. 2019) found better for NER."""

    def __init__(self, head_dim: int):
        super().__init__(head_dim)
        self.scale = 1.0


class AdditiveScore(nn.Module):
    """Additive attention vᵀ·tanh(W_q q + W_k k) (Bahdanau et al. 2015), per head."""

    fused_scale = None

    def __init__(self, head_dim: int):
        super().__init__()
        self.w_q = nn.Linear(head_dim, head_dim, bias=False)
        self.w_k = nn.Linear(head_dim, head_dim)
        self.v = nn.Linear(head_dim, 1, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q (B,h,T,d), k (B,h,S,d) -> (B,h,T,S)."""
        hidden = torch.tanh(self.w_q(q).unsqueeze(3) + self.w_k(k).unsqueeze(2))  # (B,h,T,S,d)
        return self.v(hidden).squeeze(-1)  # (B,h,T,S)


# the longest input the fused path computes as batched GEMMs at inference rather than with the flash kernel
GEMM_MAX_LEN = 128

SCORES: dict[str, type[nn.Module]] = {"scaled_dot": ScaledDotScore, "dot": DotScore, "additive": AdditiveScore}


def attention_mask(mask: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """Which keys each query may attend to.

    mask (B,T) bool, True on real tokens -> allowed (B,1,T,T) bool: real keys, within ±window of the
    query when a window is set. The diagonal is always allowed so that no row (even a padding
    query's) is empty — for a real query the diagonal is a real key anyway.
    """
    T = mask.shape[1]
    allowed = mask[:, None, None, :]  # (B,1,1,T)
    i = torch.arange(T, device=mask.device)
    if window is not None:
        allowed = allowed & ((i[:, None] - i[None, :]).abs() <= window)  # (B,1,T,T)
    return allowed | (i[:, None] == i[None, :])  # (B,1,T,T)


def _memo(shared: dict, key: tuple, make):
    """shared[key], made by ``make()`` the first time it is asked for."""
    if key not in shared:
        shared[key] = make()
    return shared[key]


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int, score: str = "scaled_dot", attn_dropout: float = 0.0,
                 window: int | None = None, fast_path: bool = True):
        super().__init__()
        if d_model % heads != 0:
            raise ValueError(f"model.d_model ({d_model}) must be divisible by model.heads ({heads})")
        if score not in SCORES:
            raise ValueError(f"model.score must be one of {sorted(SCORES)}, got {score!r}")
        if window is not None and window < 0:
            raise ValueError(f"model.window must be null or >= 0, got {window}")
        self.heads, self.head_dim, self.window = heads, d_model // heads, window
        self.qkv = nn.Linear(d_model, 3 * d_model)  # q, k, v projections in one matmul
        self.out = nn.Linear(d_model, d_model)  # W_O mixes the concatenated heads
        self.score = SCORES[score](self.head_dim)
        self.attn_dropout = attn_dropout
        self.dropout = nn.Dropout(attn_dropout)
        self.fast_path = fast_path

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None,
                need_weights: bool = False, shared: dict | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B,T,C), mask (B,T) bool, bias (h,T,T) or None -> y (B,T,C), weights (B,h,T,T) or None.

        ``shared``: a dict the layers of one encoder pass share (same mask and bias), so the masks that depend only
        on the window are built once, not once per layer."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B,T,C)
        q, k, v = (t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B,h,T,hs)
        shared = {} if shared is None else shared
        allowed = _memo(shared, ("allowed", self.window), lambda: attention_mask(mask, self.window))  # (B,1,T,T)
        if self.fast_path and not need_weights and self.score.fused_scale is not None:
            y, weights = self._fused(q, k, v, allowed, bias, shared), None
        else:
            y, weights = self._reference(q, k, v, allowed, bias)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B,T,h*hs): heads side by side
        return self.out(y), weights

    def _reference(self, q, k, v, allowed, bias):
        scores = self.score(q, k)  # (B,h,T,T)
        if bias is not None:
            scores = scores + bias  # relative-position bias broadcasts over the batch
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (B,h,T,T), rows sum to 1 over allowed keys
        return self.dropout(weights) @ v, weights  # (B,h,T,hs)

    def _fused(self, q, k, v, allowed, bias, shared):
        # (B,h,T,T) additive mask: the position bias on allowed keys, -inf elsewhere, in one pass
        def additive() -> torch.Tensor:
            zero = torch.zeros((), dtype=q.dtype, device=q.device)
            return torch.where(allowed, zero if bias is None else bias.to(q.dtype), float("-inf"))

        attn_mask = _memo(shared, ("additive", self.window, q.dtype), additive)
        B, h, T, d = q.shape
        if not self.training and T <= GEMM_MAX_LEN:
            # inference on short inputs: two batched GEMMs around a softmax, as the flash kernel is slower on CPU up
            # to GEMM_MAX_LEN tokens (docs/reference.md, "What the predictor does for speed"); no dropout here
            flat_mask = _memo(shared, ("gemm", self.window, q.dtype, h),
                              lambda: attn_mask.expand(B, h, T, T).reshape(B * h, T, T))  # (B*h,T,T)
            scores = torch.baddbmm(flat_mask, q.reshape(B * h, T, d),
                                   k.reshape(B * h, T, d).transpose(1, 2), alpha=self.score.fused_scale)  # (B*h,T,T)
            return torch.bmm(torch.softmax(scores, dim=-1), v.reshape(B * h, T, d)).view(B, h, T, d)  # (B,h,T,hs)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.attn_dropout if self.training else 0.0,
            scale=self.score.fused_scale,
        )  # (B,h,T,hs)
