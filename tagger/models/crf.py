"""
Linear-chain conditional random field, written out by hand.

Notation used throughout (shapes in comments):
    B  batch size
    T  padded sequence length
    C  number of tags
    emissions  (B, T, C)  per-token tag scores from the encoder
    mask       (B, T)     True for real tokens; left-aligned, every row has >= 1 True
    starts     (B, T)     optional, True where a new sentence begins inside a row (document
                          context: a row holds consecutive sentences of one document)
    transitions[i, j]     score of moving from tag i to tag j

With ``starts`` a row is a chain of independent sentences: into a sentence start the transition
i -> j scores end[i] + start[j] (the previous sentence ends, the next one starts) instead of
transitions[i, j]. Every quantity then equals that of the sentences taken one by one (log Z and
the gold score add up, Viterbi concatenates, scheme constraints hold at every sentence edge),
while the emissions may come from an encoder that saw the whole row.

All recursions are vectorised over the batch and the tag set, and loop over T
only. Everything is in log space so that long sentences cannot underflow.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from tagger.schemes import allowed_transitions

# Added to the scores of transitions the tagging scheme forbids. Large enough that
# no path through a forbidden transition can win against any allowed path (the
# encoder's emissions are orders of magnitude smaller), yet finite so that a
# sentence whose *gold* path is invalid still gets a finite loss and gradient.
# Also representable in float16/bfloat16.
FORBIDDEN = -1e4


class CRF(nn.Module):
    """
    Linear-chain CRF over C tags with learned start, end and transition scores.

    If `labels` and `scheme` are given, transitions the scheme forbids receive a
    fixed FORBIDDEN penalty (a non-trainable buffer, saved in the state dict), so
    decoding never produces an invalid sequence and training cannot "unlearn" the
    constraint.
    """

    def __init__(self, num_tags: int, labels: list[str] | None = None, scheme: str | None = None):
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        if labels is not None and len(labels) != num_tags:
            raise ValueError(f"got {len(labels)} labels for num_tags={num_tags}")
        if scheme is not None and labels is None:
            raise ValueError(f"scheme {scheme!r} needs the list of labels")
        self.num_tags = num_tags
        self.labels = list(labels) if labels is not None else None
        self.scheme = scheme

        # small init, as in most CRF implementations: the emissions dominate early in training
        self.start = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

        if labels is not None:
            start_ok, trans_ok, end_ok = (torch.tensor(a, dtype=torch.bool)
                                          for a in allowed_transitions(self.labels, scheme))
        else:
            start_ok = torch.ones(num_tags, dtype=torch.bool)
            trans_ok = torch.ones(num_tags, num_tags, dtype=torch.bool)
            end_ok = torch.ones(num_tags, dtype=torch.bool)
        # stored as additive penalties (0 or FORBIDDEN) so they follow .to(dtype/device)
        self.register_buffer("start_penalty", (~start_ok).float() * FORBIDDEN)
        self.register_buffer("trans_penalty", (~trans_ok).float() * FORBIDDEN)
        self.register_buffer("end_penalty", (~end_ok).float() * FORBIDDEN)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, scheme={self.scheme}"

    # ------------------------------------------------------------------ helpers

    def _potentials(self) -> tuple[Tensor, Tensor, Tensor]:
        """Constrained start (C,), transitions (C, C) and end (C,) scores."""
        return (self.start + self.start_penalty,
                self.transitions + self.trans_penalty,
                self.end + self.end_penalty)

    def _check(self, emissions: Tensor, mask: Tensor, tags: Tensor | None = None,
               starts: Tensor | None = None) -> Tensor:
        """Validate shapes; returns the mask as bool."""
        if emissions.dim() != 3 or emissions.size(2) != self.num_tags:
            raise ValueError(f"emissions must be (B, T, {self.num_tags}), got {tuple(emissions.shape)}")
        if mask.shape != emissions.shape[:2]:
            raise ValueError(f"mask must be {tuple(emissions.shape[:2])}, got {tuple(mask.shape)}")
        if tags is not None and tags.shape != emissions.shape[:2]:
            raise ValueError(f"tags must be {tuple(emissions.shape[:2])}, got {tuple(tags.shape)}")
        if starts is not None and (starts.shape != emissions.shape[:2] or starts.dtype != torch.bool):
            raise ValueError(f"starts must be a bool {tuple(emissions.shape[:2])}, got {starts.dtype} {tuple(starts.shape)}")
        mask = mask.bool()
        # the recursions start every sentence at t=0; an empty row would silently score garbage
        if not bool(mask[:, 0].all()):
            raise ValueError("mask[:, 0] must be True for every sequence (left-aligned, non-empty)")
        return mask

    @staticmethod
    def _edge(start: Tensor, end: Tensor) -> Tensor:
        """Scores of i -> j across a sentence edge: end[i] + start[j], (C, C)."""
        return end.unsqueeze(1) + start.unsqueeze(0)

    @staticmethod
    def _into(t: int, trans: Tensor, edge: Tensor, starts: Tensor | None) -> Tensor:
        """Transition scores into position t: trans (C, C), or (B, C, C) with ``edge`` in the rows where a
        sentence starts at t."""
        if starts is None:
            return trans
        return torch.where(starts[:, t, None, None], edge, trans)  # (B, C, C)

    def _forward_alphas(self, emissions: Tensor, starts: Tensor | None = None) -> Tensor:
        """
        Forward recursion. alphas[b, t, j] = log-sum of scores of all prefixes ending
        in tag j at position t. Returns (B, T, C); only real positions are meaningful.

        The loop is what training pays per batch, in autograd nodes per step: the emissions are cut into
        steps by one unbind, each tag's emission is added after the sum over the previous tag (on (B, C),
        not (B, C, C); the same value, another order of float additions), and past a row's end the
        recursion runs on over the padding's emissions instead of a masked select per step: nothing reads
        those positions (``log_partition`` takes each row's last real alpha).
        """
        start, trans, end = self._potentials()
        edge = self._edge(start, end)  # (C, C)
        emit = emissions.unbind(1)  # T x (B, C)
        alpha = start + emit[0]  # (B, C)
        alphas = [alpha]
        for t in range(1, len(emit)):
            into = self._into(t, trans, edge, starts)  # (C, C) or (B, C, C)
            # (B, C, 1) + (C, C) -> (B, C, C), summed over the previous tag i, then + emission of tag j
            alpha = torch.logsumexp(alpha.unsqueeze(2) + into, dim=1) + emit[t]  # (B, C)
            alphas.append(alpha)
        return torch.stack(alphas, dim=1)  # (B, T, C)

    # ------------------------------------------------------------------ public API

    def log_partition(self, emissions: Tensor, mask: Tensor, starts: Tensor | None = None) -> Tensor:
        """
        log Z: log-sum-exp of the scores of all tag paths of each sentence (of each row's
        sentences, summed, with ``starts``).

        emissions (B, T, C) float, mask (B, T) bool, starts (B, T) bool or None -> (B,)
        """
        mask = self._check(emissions, mask, starts=starts)
        _, _, end = self._potentials()
        alphas = self._forward_alphas(emissions, starts)  # (B, T, C)
        last = (mask.sum(dim=1) - 1).view(-1, 1, 1).expand(-1, 1, alphas.size(2))  # (B, 1, C), left-aligned mask
        alpha_last = alphas.gather(1, last).squeeze(1)  # (B, C) at each row's last real token
        return torch.logsumexp(alpha_last + end, dim=1)

    def score(self, emissions: Tensor, tags: Tensor, mask: Tensor, starts: Tensor | None = None) -> Tensor:
        """
        Unnormalised score of the given tag path:
        start[y_0] + sum_t emissions[t, y_t] + sum_t trans[y_{t-1}, y_t] + end[y_last].

        emissions (B, T, C) float, tags (B, T) long (padding values are ignored, may be
        e.g. -100), mask (B, T) bool, starts (B, T) bool or None -> (B,)
        """
        mask = self._check(emissions, mask, tags, starts)
        start, trans, end = self._potentials()
        # padding may hold an ignore index; make it a valid index, its terms get masked anyway
        tags = tags.long().masked_fill(~mask, 0)  # (B, T)

        emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
        emit = emit.masked_fill(~mask, 0.0).sum(dim=1)  # (B,)
        # left-aligned mask: transition t-1 -> t exists iff token t is real
        step = trans[tags[:, :-1], tags[:, 1:]]  # (B, T-1)
        if starts is not None:  # into a sentence start: the previous sentence ends, the next one starts
            step = torch.where(starts[:, 1:], self._edge(start, end)[tags[:, :-1], tags[:, 1:]], step)  # (B, T-1)
        step = step.masked_fill(~mask[:, 1:], 0.0).sum(dim=1)  # (B,)
        last = mask.sum(dim=1) - 1  # (B,)
        last_tags = tags.gather(1, last.unsqueeze(1)).squeeze(1)  # (B,)
        return start[tags[:, 0]] + emit + step + end[last_tags]

    def nll(self, emissions: Tensor, tags: Tensor, mask: Tensor, reduction: str = "mean",
            starts: Tensor | None = None) -> Tensor:
        """
        Negative log-likelihood log Z - score(tags).

        emissions (B, T, C), tags (B, T), mask (B, T), starts (B, T) or None ->
            "mean": scalar, averaged over rows
            "sum": scalar, summed over sentences
            "token_mean": scalar, sum divided by the number of real tokens
            "none": (B,)
        """
        mask = self._check(emissions, mask, tags, starts)
        nll = self.log_partition(emissions, mask, starts) - self.score(emissions, tags, mask, starts)  # (B,)
        if reduction == "mean":
            return nll.mean()
        if reduction == "sum":
            return nll.sum()
        if reduction == "token_mean":
            return nll.sum() / mask.sum()
        if reduction == "none":
            return nll
        raise ValueError(f"unknown reduction {reduction!r}; expected 'mean', 'sum', 'token_mean' or 'none'")

    @torch.no_grad()
    def decode(self, emissions: Tensor, mask: Tensor, starts: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """
        Viterbi decoding.

        emissions (B, T, C), mask (B, T), starts (B, T) or None -> (best tags (B, T) long with
        padding = 0, score of the best path (B,))
        """
        mask = self._check(emissions, mask, starts=starts)
        start, trans, end = self._potentials()
        edge = self._edge(start, end)  # (C, C)
        B, T, C = emissions.shape
        # at padding, point every tag back to itself so backtracking walks through unchanged
        identity = torch.arange(C, device=emissions.device).expand(B, C)  # (B, C)

        best = start + emissions[:, 0]  # (B, C)
        backpointers = []
        for t in range(1, T):
            # (B, C, 1) + (C, C) -> (B, C, C), maximised over the previous tag i
            into = self._into(t, trans, edge, starts)  # (C, C) or (B, C, C)
            cand, prev = (best.unsqueeze(2) + into).max(dim=1)  # (B, C), (B, C)
            keep = mask[:, t].unsqueeze(1)  # (B, 1)
            best = torch.where(keep, cand + emissions[:, t], best)
            backpointers.append(torch.where(keep, prev, identity))

        path_score, last = (best + end).max(dim=1)  # (B,), (B,)
        tags = torch.zeros(B, T, dtype=torch.long, device=emissions.device)
        tags[:, -1] = last
        for t in range(T - 1, 0, -1):
            last = backpointers[t - 1].gather(1, last.unsqueeze(1)).squeeze(1)  # (B,)
            tags[:, t - 1] = last
        return tags.masked_fill(~mask, 0), path_score

    def marginals(self, emissions: Tensor, mask: Tensor, starts: Tensor | None = None) -> Tensor:
        """
        Per-token posterior tag probabilities p(y_t = j | x) by forward-backward.

        emissions (B, T, C), mask (B, T), starts (B, T) or None -> (B, T, C); rows sum to 1
        at real tokens, are 0 at padding.
        """
        mask = self._check(emissions, mask, starts=starts)
        start, trans, end = self._potentials()
        edge = self._edge(start, end)  # (C, C)
        T = emissions.size(1)
        alphas = self._forward_alphas(emissions, starts)  # (B, T, C), read at real positions only

        # betas[b, t, i] = log-sum of scores of all suffixes after position t given tag i there
        beta = end.expand_as(alphas[:, -1])  # (B, C)
        betas = [beta]
        for t in range(T - 2, -1, -1):
            into = self._into(t + 1, trans, edge, starts)  # (C, C) or (B, C, C)
            # (C, C) + (B, 1, C) -> (B, C, C), summed over the next tag j
            nxt = torch.logsumexp(into + (emissions[:, t + 1] + beta).unsqueeze(1), dim=2)  # (B, C)
            # if token t+1 is padding then t is the last real token (or padding): only `end` follows
            beta = torch.where(mask[:, t + 1].unsqueeze(1), nxt, end.expand_as(nxt))
            betas.append(beta)
        betas = torch.stack(betas[::-1], dim=1)  # (B, T, C)

        # logsumexp_j(alpha_t + beta_t) equals log Z at every t in exact arithmetic. Normalising
        # per position instead of subtracting the global log Z keeps rows summing to 1 even in
        # float32 on long sentences, where alphas and betas reach magnitudes ~1e4 and their
        # rounding error (~1e-3) would otherwise show up directly in the probabilities.
        probs = torch.softmax(alphas + betas, dim=2)  # (B, T, C)
        return probs.masked_fill(~mask.unsqueeze(2), 0.0)
