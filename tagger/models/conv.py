"""A same-length convolution over positions on channel-last input, and the same map as one matrix product.

Two modules use it: the character CNN of the embedder (over the characters of a word) and the first FFN
layer of a self-attention block (``model.ffn_kernel``, over the words of a sentence). Training runs
:class:`TokenConv`; inference backends swap in :class:`UnfoldedConv` (:func:`unfold_convs`), which computes
the same numbers through an ``nn.Linear``, so int8 dynamic quantization and bf16 GEMMs reach it (on a CPU a
narrow 1-D convolution also runs slower than the GEMM of its unfolded input).
"""
from __future__ import annotations

import copy
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenConv(nn.Conv1d):
    """A convolution over positions on (B,T,d_in) -> (B,T,d_out), same length (odd kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)  # (B,d_in,T) -> (B,d_out,T) -> (B,T,d_out)


class UnfoldedConv(nn.Module):
    """The map of a :class:`TokenConv`, (B,T,d_in) -> (B,T,d_out): each position's k-wide neighbourhood
    unfolded into one row (B,T,k*d_in), times a Linear holding the convolution's weights."""

    def __init__(self, conv: TokenConv):
        super().__init__()
        d_out, d_in, k = conv.weight.shape
        if conv.padding != (k // 2,) or conv.stride != (1,) or conv.dilation != (1,) or conv.groups != 1:
            raise ValueError(f"UnfoldedConv reproduces same-length convolutions only, got {conv}")
        self.kernel = k
        self.linear = nn.Linear(k * d_in, d_out, bias=conv.bias is not None)
        with torch.no_grad():  # row layout [x_{t-k//2} ; ... ; x_{t+k//2}] <- weight (d_out, d_in, k)
            self.linear.weight.copy_(conv.weight.permute(0, 2, 1).reshape(d_out, k * d_in))
            if conv.bias is not None:
                self.linear.bias.copy_(conv.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        half = self.kernel // 2
        padded = F.pad(x, (0, 0, half, half))  # (B,T+k-1,d_in)
        rows = padded.unfold(1, self.kernel, 1).transpose(2, 3).reshape(B, T, self.kernel * d)  # (B,T,k*d_in)
        return self.linear(rows)  # (B,T,d_out)


def unfold_convs(module: nn.Module) -> nn.Module:
    """A copy of ``module``'s tree of submodules with every :class:`TokenConv` replaced by its :class:`UnfoldedConv`.
    The module itself is left as is; the copy shares its parameters and buffers (a served model with 400k
    vector rows is not held twice), so change the copy's tensors only after copying them (``.to(dtype)`` of a
    shared parameter would convert the original's too)."""
    shared = {id(t): t for t in itertools.chain(module.parameters(), module.buffers())}
    out = copy.deepcopy(module, memo=shared)
    for parent in list(out.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, TokenConv):
                setattr(parent, name, UnfoldedConv(child))
    return out
