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


def _char_ids(chars: list[str], words: list[str]) -> torch.Tensor:
    """(1, len(words), L) character ids, padded with PAD_ID; characters outside ``chars`` -> UNK."""
    index = {c: i for i, c in enumerate(chars)}
    L = max(len(w) for w in words)
    ids = torch.full((1, len(words), L), PAD_ID, dtype=torch.long)
    for t, w in enumerate(words):
        ids[0, t, : len(w)] = torch.tensor([index.get(c, UNK_ID) for c in w])
    return ids


def test_casing_classes_of_known_words():
    from tagger.models.embedder import CASING, Casing

    chars = ["<pad>", "<unk>"] + list("abcABC0123-.")
    words = ["abc", "ABC", "Abc", "aBc", "2013", "12.3", "a1", "A-1", "-", "é"]
    expected = ["all_lower", "all_upper", "initial_upper", "other", "numeric", "mainly_numeric", "contains_digit",
                "initial_upper", "other", "other"]
    ids = _char_ids(chars, words)  # "é" is not in chars: UNK -> other
    ids = torch.cat([ids, torch.full((1, 1, ids.shape[2]), PAD_ID)], dim=1)  # a padding word
    got = Casing(chars, 3).classes(ids)[0].tolist()
    assert [CASING[i] for i in got] == expected + ["padding"]


def test_case_embedding_is_concatenated_and_zero_for_padding_words():
    chars = ["<pad>", "<unk>"] + list("abAB")
    emb = Embedder(4, len(chars), word_dim=4, char_filters=0, dropout=0.0, word_dropout=0.0, case_dim=3, chars=chars)
    assert emb.output_dim == 7
    ids = _char_ids(chars, ["ab", "AB", "Ab"])
    ids = torch.cat([ids, torch.full((1, 1, 2), PAD_ID)], dim=1)
    out = emb.eval()(torch.tensor([[2, 2, 2, PAD_ID]]), ids)  # the same word id, three casings, then padding
    case = out[0, :, 4:]  # (T, 3)
    assert not torch.allclose(case[0], case[1]) and not torch.allclose(case[1], case[2])
    assert torch.equal(out[0, 0, :4], out[0, 1, :4])  # the word part does not see the casing
    assert torch.count_nonzero(case[3]) == 0


def test_case_dim_needs_the_character_vocabulary():
    with pytest.raises(ValueError, match="embedder.case_dim needs the character vocabulary"):
        Embedder(4, 5, case_dim=4)
    with pytest.raises(ValueError, match="embedder.case_dim must be >= 0"):
        Embedder(4, 5, case_dim=-1, chars=["<pad>", "<unk>", "a", "b", "c"])


@pytest.mark.parametrize("case_dim", [0, 3])
def test_spelling_once_per_distinct_word_gives_the_per_token_outputs_and_gradients(case_dim):
    chars = ["<pad>", "<unk>", "a", "b", "A", "1"]
    emb = Embedder(6, len(chars), word_dim=4, char_dim=5, char_filters=7, dropout=0.3, word_dropout=0.2,
                   case_dim=case_dim, chars=chars).train()
    type_chars = torch.tensor([[0, 0, 0], [2, 3, 0], [4, 2, 2], [5, 5, 5], [3, 0, 0]])  # (U,L) row 0 the empty word
    types = torch.tensor([[1, 2, 1, 3, 4], [2, 1, 4, 0, 0]])  # (B,T) repeated words, padding -> 0
    words = torch.tensor([[2, 3, 2, 4, 5], [3, 2, 5, 0, 0]])

    def run(*inputs):
        emb.zero_grad()
        torch.manual_seed(0)  # the same dropout draws on both paths
        out = emb(*inputs)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        return out, {n: p.grad.clone() for n, p in emb.named_parameters() if p.grad is not None}

    per_token, grads = run(words, type_chars[types])  # chars (B,T,L)
    per_type, type_grads = run(words, type_chars, types)
    assert per_type.shape == (2, 5, emb.output_dim)
    torch.testing.assert_close(per_type, per_token, rtol=0, atol=1e-6)
    assert grads.keys() == type_grads.keys() and "char.conv.weight" in grads
    for name in grads:  # summed over the tokens of a word first, then through the CNN: another order of float sums
        torch.testing.assert_close(type_grads[name], grads[name], rtol=1e-5, atol=1e-6, msg=name)
