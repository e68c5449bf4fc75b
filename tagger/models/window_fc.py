"""Window approach (Collobert et al. 2011): each token sees only its ±k neighbours, through an MLP."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class WindowFCEncoder(nn.Module):
    """x (B,T,D), mask (B,T) -> (B,T,hidden).

    Token i's input is the concatenation of the vectors at i-k..i+k; positions past the sentence
    edge (and padding) take a learned PADDING vector, as Collobert's padding word does.
    """

    has_attention = False  # the encoder contract: no attention weights to show

    def __init__(self, input_dim: int, window: int = 2, hidden_dim: int = 300, layers: int = 1,
                 dropout: float = 0.3, activation: str = "relu"):
        super().__init__()
        if window < 0:
            raise ValueError(f"model.window must be >= 0, got {window}")
        acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "hardtanh": nn.Hardtanh, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"model.activation must be one of {sorted(acts)}, got {activation!r}")
        self.window = window
        self.pad = nn.Parameter(torch.zeros(input_dim))
        blocks, d = [], input_dim * (2 * window + 1)
        for _ in range(layers):
            blocks += [nn.Linear(d, hidden_dim), acts[activation](), nn.Dropout(dropout)]
            d = hidden_dim
        self.mlp = nn.Sequential(*blocks)
        self.output_dim = d

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        k = self.window
        x = torch.where(mask.unsqueeze(-1), x, self.pad)  # (B,T,D) padding -> PADDING vector
        edge = self.pad.expand(B, k, D)
        x = torch.cat([edge, x, edge], dim=1)  # (B,T+2k,D)
        windows = x.unfold(1, 2 * k + 1, 1)  # (B,T,D,2k+1)
        windows = windows.transpose(2, 3).reshape(B, T, (2 * k + 1) * D)  # (B,T,(2k+1)*D) in position order
        return self.mlp(windows)  # (B,T,hidden)
