"""Self-attention encoder: N blocks of [multi-head attention + position-wise feed-forward].

Every design choice is a constructor argument (and so a ``model.*`` config value): score function,
positional encoding and how it is combined, local window (one for all blocks or one per block), pre/post norm.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from tagger.models.attention import MultiHeadSelfAttention
from tagger.models.conv import TokenConv
from tagger.models.positional import POSITIONAL


class FeedForward(nn.Module):
    """The position-wise MLP of a block; with ``kernel`` k > 1 its first layer is a width-k convolution
    over positions (each token's hidden units also see its ±k//2 neighbours: a local n-gram feature
    beside the attention)."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float, activation: str, kernel: int = 1):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"model.activation must be one of {sorted(acts)}, got {activation!r}")
        if kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"model.ffn_kernel must be an odd integer >= 1, got {kernel}")
        first = nn.Linear(d_model, ffn_dim) if kernel == 1 else TokenConv(d_model, ffn_dim, kernel, padding=kernel // 2)
        self.net = nn.Sequential(first, acts[activation](), nn.Dropout(dropout), nn.Linear(ffn_dim, d_model))
        self.local = kernel > 1

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B,T,d), mask (B,T) -> (B,T,d)."""
        if self.local:
            x = x.masked_fill(~mask[..., None], 0.0)  # (B,T,d): padding must not reach the real tokens
        return self.net(x)


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn_dim: int, dropout: float, attn_dropout: float,
                 score: str, window: int | None, norm: str, activation: str, fast_path: bool, ffn_kernel: int = 1):
        super().__init__()
        if norm not in ("pre", "post"):
            raise ValueError(f"model.norm must be 'pre' or 'post', got {norm!r}")
        self.pre_norm = norm == "pre"
        self.attn = MultiHeadSelfAttention(d_model, heads, score, attn_dropout, window, fast_path)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation, ffn_kernel)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask, bias=None, need_weights=False, shared=None):
        """x (B,T,d) -> (B,T,d), weights (B,h,T,T) or None. ``shared``: masks kept across the blocks of one pass."""
        if self.pre_norm:
            a, w = self.attn(self.norm1(x), mask, bias, need_weights, shared)
            x = x + self.dropout(a)
            x = x + self.dropout(self.ffn(self.norm2(x), mask))
        else:
            a, w = self.attn(x, mask, bias, need_weights, shared)
            x = self.norm1(x + self.dropout(a))
            x = self.norm2(x + self.dropout(self.ffn(x, mask)))
        return x, w


class SelfAttentionEncoder(nn.Module):
    """x (B,T,input_dim), mask (B,T) -> (B,T,d_model); with ``need_weights`` also the attention
    weights of every layer, a list of (B,heads,T,T)."""

    has_attention = True  # the encoder contract: forward(..., need_weights=True) returns them

    def __init__(
        self,
        input_dim: int,
        d_model: int = 128,
        heads: int = 4,
        layers: int = 2,
        ffn_dim: int = 256,
        dropout: float = 0.1,
        attn_dropout: float = 0.1,
        score: str = "scaled_dot",
        pos_encoding: str = "sinusoidal",
        pos_combine: str = "add",
        window: int | None | Sequence[int | None] = None,
        max_len: int = 512,
        max_distance: int = 16,
        norm: str = "pre",
        activation: str = "gelu",
        fast_path: bool = True,
        ffn_kernel: int = 1,
    ):
        super().__init__()
        if pos_encoding not in POSITIONAL:
            raise ValueError(f"model.pos_encoding must be one of {sorted(POSITIONAL)}, got {pos_encoding!r}")
        if pos_combine not in ("add", "concat"):
            raise ValueError(f"model.pos_combine must be 'add' or 'concat', got {pos_combine!r}")
        if layers < 1:
            raise ValueError(f"model.layers must be >= 1, got {layers}")
        # one window for every block, or one per block (e.g. [3, null]: local below, whole input on top)
        windows = list(window) if isinstance(window, Sequence) else [window] * layers
        if len(windows) != layers:
            raise ValueError(f"model.window must be one value or a list of model.layers={layers} values, got {window}")
        self.input_proj = nn.Linear(input_dim, d_model)
        self.positions = POSITIONAL[pos_encoding](d_model, heads, max_len, max_distance)
        # concat: [a_i ; e_i] projected back to d_model, so the model can keep the two apart
        self.combine = nn.Linear(2 * d_model, d_model) if pos_combine == "concat" else None
        self.blocks = nn.ModuleList(
            Block(d_model, heads, ffn_dim, dropout, attn_dropout, score, w, norm, activation, fast_path,
                  ffn_kernel)
            for w in windows
        )
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len if pos_encoding == "learned" else None  # the only length limit
        self.output_dim = d_model

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        B, T, _ = x.shape
        h = self.input_proj(x)  # (B,T,d)
        pe = self.positions.absolute(T, x.device)  # (T,d) or None
        if pe is not None:
            pe = pe.unsqueeze(0).expand(B, T, -1)  # (B,T,d)
            h = self.combine(torch.cat([h, pe], dim=-1)) if self.combine is not None else h + pe
        bias = self.positions.relative_bias(T, x.device)  # (h,T,T) or None, shared by all layers
        h = self.dropout(h)
        weights, shared = [], {}  # shared: attention masks built once per window for every block
        for block in self.blocks:
            h, w = block(h, mask, bias, need_weights, shared)
            weights.append(w)
        h = self.final_norm(h)
        return (h, weights) if need_weights else h
