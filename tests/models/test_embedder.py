from __future__ import annotations

import pytest
import torch

from tagger.data.vocab import PAD_ID, UNK_ID
from tagger.models.embedder import Embedder


def _unk_rate(emb: Embedder, word_id: int, n: int = 20000) -> float:
    """Fraction of n training-mode lookups of one word that the embedder replaced by UNK."""
    seen = []
    hook = emb.word.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
    try:
        emb.train()(torch.full((1, n), word_id), torch.ones(1, n, 1, dtype=torch.long))
    finally:
        hook.remove()
    (ids,) = seen
    return (ids == UNK_ID).float().mean().item()


def test_rare_word_dropout_follows_alpha_over_alpha_plus_count():
    counts = [0, 0, 1000, 1]  # PAD, UNK, a frequent word, a singleton
    emb = Embedder(4, 5, word_dim=4, char_filters=0, word_dropout=0.0, rare_word_dropout=0.25, word_counts=counts)
    assert _unk_rate(emb, 3) == pytest.approx(0.25 / 1.25, abs=0.015)  # singleton: 0.2
    assert _unk_rate(emb, 2) == pytest.approx(0.25 / 1000.25, abs=0.002)


def test_word_dropout_is_a_floor_under_rare_word_dropout_and_padding_is_never_dropped():
    emb = Embedder(4, 5, word_dim=4, char_filters=0, word_dropout=0.1, rare_word_dropout=0.25, word_counts=[0, 0, 1000, 1])
    assert _unk_rate(emb, 2) == pytest.approx(0.1, abs=0.015)
    assert _unk_rate(emb, PAD_ID) == 0.0


def test_no_dropout_at_evaluation():
    emb = Embedder(4, 5, word_dim=4, char_filters=0, word_dropout=0.5, rare_word_dropout=1.0, word_counts=[0, 0, 1, 1])
    words = torch.tensor([[2, 3, 2, 3]])
    chars = torch.ones(1, 4, 1, dtype=torch.long)
    emb.eval()
    assert torch.equal(emb(words, chars), emb.word(words))  # dropout layers are off too


def test_rare_word_dropout_without_counts_is_a_clear_error():
    with pytest.raises(ValueError, match="embedder.rare_word_dropout needs the training word counts"):
        Embedder(4, 5, rare_word_dropout=0.25)
    with pytest.raises(ValueError, match="embedder.rare_word_dropout must be >= 0"):
        Embedder(4, 5, rare_word_dropout=-1.0, word_counts=[0, 0, 1, 1])
