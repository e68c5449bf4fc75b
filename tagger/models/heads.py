"""Tag heads shared by every encoder: per-token softmax or a linear-chain CRF.

Both: ``loss(h, tags, mask, starts=None)``, ``decode(h, mask, starts=None) -> (pred (B,T) long, prob (B,T)
float)`` where prob is the model's probability of the predicted tag (the CRF's is the marginal, not the
softmax), and ``tags(h, mask, starts=None) -> pred (B,T)``, decode's tags without the probabilities (what a
metric needs: the CRF's marginals cost a forward and a backward recursion beside Viterbi's). ``starts`` (B,T)
bool marks sentence starts inside a row of several sentences (document context): the CRF then scores each
sentence as its own chain; per-token softmax needs no such thing.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from tagger.data.vocab import IGNORE_INDEX
from tagger.models.crf import CRF


class SoftmaxHead(nn.Module):
    def __init__(self, input_dim: int, labels: list[str], scheme: str | None = None, label_smoothing: float = 0.0):
        super().__init__()
        self.proj = nn.Linear(input_dim, len(labels))
        self.label_smoothing = label_smoothing

    def loss(self, h: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor,
             starts: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.proj(h)  # (B,T,C)
        return F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=IGNORE_INDEX,
                               label_smoothing=self.label_smoothing)

    def decode(self, h: torch.Tensor, mask: torch.Tensor,
               starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        probs = F.softmax(self.proj(h), dim=-1)  # (B,T,C)
        prob, pred = probs.max(dim=-1)  # (B,T)
        return pred.masked_fill(~mask, 0), prob.masked_fill(~mask, 0.0)

    def tags(self, h: torch.Tensor, mask: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        # through the softmax, as decode: the argmax of the logits could break a tie the rounded probabilities make
        return self.decode(h, mask, starts)[0]  # (B,T)


class CRFHead(nn.Module):
    """Emissions + linear-chain CRF; ``constrain`` forbids transitions the tag scheme rules out
    (no I-X after O or after I-Y in IOB2), so decoding never emits an invalid sequence."""

    def __init__(self, input_dim: int, labels: list[str], scheme: str | None = None, constrain: bool = True):
        super().__init__()
        self.proj = nn.Linear(input_dim, len(labels))
        self.crf = CRF(len(labels), list(labels), scheme if constrain else None)

    def loss(self, h: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor,
             starts: torch.Tensor | None = None) -> torch.Tensor:
        return self.crf.nll(self.proj(h), tags.masked_fill(~mask, 0), mask, reduction="token_mean", starts=starts)

    def decode(self, h: torch.Tensor, mask: torch.Tensor,
               starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        emissions = self.proj(h)  # (B,T,C)
        pred, _ = self.crf.decode(emissions, mask, starts)  # (B,T)
        marg = self.crf.marginals(emissions, mask, starts)  # (B,T,C)
        prob = marg.gather(-1, pred.unsqueeze(-1)).squeeze(-1)  # (B,T)
        return pred.masked_fill(~mask, 0), prob.masked_fill(~mask, 0.0)

    def tags(self, h: torch.Tensor, mask: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        return self.crf.decode(self.proj(h), mask, starts)[0].masked_fill(~mask, 0)  # (B,T)
