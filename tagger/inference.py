"""In-process prediction for a trained tagger: used by evaluation, reports, packaging and the service.

Long inputs are never truncated: a sentence longer than ``window`` tokens is cut into overlapping
windows, each token taking its tag from the window where it sits farthest from an edge.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from tagger.data.datamodule import collate, encode_sentence
from tagger.data.vocab import Vocab
from tagger.models.tagger import Tagger


def windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Cover 0..n with [start, end) spans of at most ``size`` tokens overlapping by ``overlap``."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    if n <= size:
        return [(0, n)]
    spans, start, stride = [], 0, size - overlap
    while True:
        end = min(start + size, n)
        spans.append((start, end))
        if end == n:
            return spans
        start += stride


@dataclass
class TokenPrediction:
    tag: str
    score: float


class Predictor:
    def __init__(self, tagger: Tagger, vocab: Vocab, batch_size: int = 256, window: int | None = None,
                 overlap: int = 32, max_word_chars: int = 40):
        self.tagger, self.vocab = tagger.eval(), vocab
        self.batch_size, self.max_word_chars = batch_size, max_word_chars
        limit = tagger.max_len
        self.window = min(window or limit or 512, limit or 10**9)
        self.overlap = min(overlap, self.window // 4)

    @torch.inference_mode()
    def predict(self, sentences: list[list[str]]) -> list[list[TokenPrediction]]:
        pieces = []  # (sentence index, start, end)
        for s, tokens in enumerate(sentences):
            if not tokens:
                continue
            pieces += [(s, a, b) for a, b in windows(len(tokens), self.window, self.overlap)]
        order = sorted(range(len(pieces)), key=lambda p: pieces[p][2] - pieces[p][1])
        piece_out: dict[int, tuple[list[int], list[float]]] = {}
        for i in range(0, len(order), self.batch_size):
            chunk = order[i : i + self.batch_size]
            items = [encode_sentence(self.vocab, sentences[s][a:b]) for s, a, b in (pieces[p] for p in chunk)]
            batch = collate(items, self.max_word_chars)
            pred, prob = self.tagger.predict(batch)  # (B,T), (B,T)
            for row, p in enumerate(chunk):
                n = pieces[p][2] - pieces[p][1]
                piece_out[p] = (pred[row, :n].tolist(), prob[row, :n].tolist())
        # merge windows: token t keeps the prediction of the window where it is most central
        best: list[list[tuple[int, int, float]]] = [[(-1, 0, 0.0)] * len(t) for t in sentences]
        for p, (s, a, b) in enumerate(pieces):
            tags, probs = piece_out[p]
            for j in range(b - a):
                margin = min(j, b - a - 1 - j)
                if margin > best[s][a + j][0]:
                    best[s][a + j] = (margin, tags[j], probs[j])
        labels = self.vocab.labels
        return [[TokenPrediction(labels[t], float(pr)) for _, t, pr in sent] for sent in best]

    def tags(self, sentences: list[list[str]]) -> list[list[str]]:
        return [[tp.tag for tp in sent] for sent in self.predict(sentences)]

    @torch.inference_mode()
    def attention(self, tokens: list[str]) -> list[list[list[list[float]]]]:
        """Attention weights of one sentence: [layer][head][query][key] (raises AttentionNotSupported)."""
        if len(tokens) > self.window:
            raise ValueError(f"attention is shown for sentences of at most {self.window} tokens, got {len(tokens)}")
        batch = collate([encode_sentence(self.vocab, tokens)], self.max_word_chars)
        return [w[0].tolist() for w in self.tagger.attention(batch)]  # each (heads,T,T)
