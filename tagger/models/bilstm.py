"""Bidirectional LSTM encoder, packed so padding never enters the recurrence."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class BiLSTMEncoder(nn.Module):
    """x (B,T,D), mask (B,T) -> (B,T,2*hidden_dim)."""

    has_attention = False  # the encoder contract: no attention weights to show

    def __init__(self, input_dim: int, hidden_dim: int = 256, layers: int = 2, dropout: float = 0.33):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=layers, batch_first=True,
                            bidirectional=True, dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = 2 * hidden_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        lengths = mask.sum(1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=T)  # (B,T,2H)
        return self.dropout(out)
