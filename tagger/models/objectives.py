"""Auxiliary training objectives: a second pass over each training batch whose loss, times ``weight``,
adds to the tagging loss; used in training only, never in prediction. Each implements
``term(tagger, batch, x, loss)``: ``x`` (B,T,D) is the embedder's output of the tagging pass, ``loss``
its tagging loss.

``MaskedWords`` is BERT's masked-word prediction run on the training text itself (no outside
data): in a second pass over each training batch a fraction of its tokens is hidden from the model
(word vector -> UNK, characters -> none) and the encoder's state at each hidden position must name
the word through the word embedding table (tied output, Press & Wolf 2017). The tagging loss is
that of the first pass, on the whole input. The idea is Rei (2017)'s language-modelling cost for
sequence labelling, in the form a bidirectional encoder allows.

The tokens are hidden in a pass of their own because hiding them in the tagging pass costs the
tagging loss part of its input. Not a default: results in reports/self_attention_tuning.md.

``Adversarial`` is adversarial training (Goodfellow et al. 2015 in the form of Miyato et al. 2017 for
text, used for tagging by Yasunaga et al. 2018): the second pass tags the same batch with its embedded
input moved a small step in the direction that raises the tagging loss most (the loss gradient with
respect to the embeddings, normalised per row), which smooths the model around each training input
and, in Yasunaga et al., helped rare and unseen words most.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from tagger.data.vocab import PAD_ID, UNK_ID


class MaskedWords(nn.Module):
    """h (B,T,input_dim) at hidden positions -> logits over the word vocabulary (tied to the embedding)."""

    def __init__(self, input_dim: int, word_dim: int, p: float = 0.15, weight: float = 0.2):
        super().__init__()
        if not 0.0 < p < 1.0:
            raise ValueError(f"aux.p must be a fraction of tokens in (0, 1), got {p}")
        if weight <= 0:
            raise ValueError(f"aux.weight must be > 0, got {weight}")
        if word_dim <= 0:
            raise ValueError("aux (masked words) predicts words through the word embedding: embedder.word_dim must be > 0")
        self.p, self.weight = p, weight
        self.proj = nn.Linear(input_dim, word_dim)
        self.norm = nn.LayerNorm(word_dim)

    def choose(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """words (B,T), mask (B,T) -> hidden positions (B,T) bool: real, known tokens with probability p."""
        return (torch.rand(words.shape, device=words.device) < self.p) & mask & (words > UNK_ID)

    @staticmethod
    def hide(batch: dict[str, torch.Tensor], hidden: torch.Tensor) -> dict[str, torch.Tensor]:
        """-> the batch with UNK words and no characters at the hidden positions (B,T): chars (B,T,L) emptied there,
        or types (B,T) pointed at row 0 of type_chars, the empty word."""
        out = {**batch, "words": batch["words"].masked_fill(hidden, UNK_ID)}  # (B,T)
        if "types" in batch:
            out["types"] = batch["types"].masked_fill(hidden, 0)  # (B,T)
        else:
            out["chars"] = batch["chars"].masked_fill(hidden.unsqueeze(-1), PAD_ID)  # (B,T,L)
        return out

    def term(self, tagger: nn.Module, batch: dict[str, torch.Tensor], x: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        """The second pass: hide some tokens, predict them from the encoder's states there."""
        hidden = self.choose(batch["words"], batch["mask"])  # (B,T)
        h = tagger.encode(self.hide(batch, hidden))  # (B,T,H)
        return self.loss(h, batch["words"], hidden, tagger.embedder.word.weight)

    def loss(self, h: torch.Tensor, words: torch.Tensor, hidden: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """h (B,T,H), words (B,T) the true ids, hidden (B,T), table (V,word_dim) -> mean cross-entropy (scalar)."""
        if not hidden.any():
            return h.sum() * 0.0  # keeps the graph (and DDP's gradient hooks) whole on an empty draw
        logits = self.norm(self.proj(h[hidden])) @ table.t()  # (N,V)
        return F.cross_entropy(logits, words[hidden])


class Adversarial(nn.Module):
    """Tagging loss on adversarially perturbed embeddings. Per row, the perturbation is
    ``epsilon * ||x|| * g / ||g||`` with ``g`` the gradient of the tagging loss with respect to the
    embedder's output ``x`` over the row's real tokens: its size is a fraction ``epsilon`` of the
    row's own embedding norm, since these embeddings are not normalised (Miyato et al. normalise
    theirs and fix the norm instead)."""

    def __init__(self, epsilon: float = 0.05, weight: float = 1.0):
        super().__init__()
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"aux.epsilon must be a fraction of the embedding norm in (0, 1), got {epsilon}")
        if weight <= 0:
            raise ValueError(f"aux.weight must be > 0, got {weight}")
        self.epsilon, self.weight = epsilon, weight

    def perturbation(self, x: torch.Tensor, loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B,T,D) in the graph of ``loss``, mask (B,T) -> r (B,T,D), constant, 0 on padding."""
        (g,) = torch.autograd.grad(loss, x, retain_graph=True)  # (B,T,D)
        m = mask.unsqueeze(-1).to(x.dtype)  # (B,T,1)
        g = g.detach() * m
        g_norm = g.flatten(1).norm(dim=1).clamp_min(1e-12)  # (B,)
        x_norm = (x.detach() * m).flatten(1).norm(dim=1)  # (B,)
        return (self.epsilon * x_norm / g_norm)[:, None, None] * g  # (B,T,D)

    def term(self, tagger: nn.Module, batch: dict[str, torch.Tensor], x: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        r = self.perturbation(x, loss, batch["mask"])  # (B,T,D)
        h = tagger.encode(batch, x + r)  # (B,T,H)
        return tagger.head.loss(h, batch["tags"], batch["mask"], batch.get("starts"))
