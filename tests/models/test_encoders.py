"""The encoder contract: forward(x (B,T,D), mask (B,T)) -> (B,T,output_dim), padding never changes
the real positions' outputs, and self-attention's notion of order comes only from positions."""
from __future__ import annotations

import itertools

import pytest
import torch

from tagger.models.bilstm import BiLSTMEncoder
from tagger.models.self_attention import SelfAttentionEncoder
from tagger.models.window_fc import WindowFCEncoder

D = 12


def encoders():
    yield "window_fc", WindowFCEncoder(D, window=2, hidden_dim=10)
    yield "bilstm", BiLSTMEncoder(D, hidden_dim=7, layers=2)
    for score, pos, combine, window in itertools.product(["scaled_dot", "dot", "additive"],
                                                         ["sinusoidal", "learned", "relative", "none"],
                                                         ["add", "concat"], [None, 3]):
        yield (f"sa-{score}-{pos}-{combine}-{window}",
               SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, ffn_dim=16, score=score, pos_encoding=pos,
                                    pos_combine=combine, window=window, max_len=32))
    yield "sa-ffn_kernel3", SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, ffn_dim=16, ffn_kernel=3)


@pytest.mark.parametrize("name,enc", list(encoders()), ids=lambda v: v if isinstance(v, str) else "")
def test_shapes_and_padding_invariance(name, enc):
    torch.manual_seed(0)
    enc.eval()
    x = torch.randn(2, 9, D)
    mask = torch.ones(2, 9, dtype=torch.bool)
    out = enc(x, mask)
    assert out.shape == (2, 9, enc.output_dim)
    # the same sentence padded with junk: the real positions' outputs must not move
    padded = torch.cat([x, torch.randn(2, 4, D) * 100], dim=1)
    pmask = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], dim=1)
    assert torch.allclose(enc(padded, pmask)[:, :9], out, atol=1e-5)


def test_window_fc_sees_only_its_window():
    enc = WindowFCEncoder(D, window=1, hidden_dim=8).eval()
    x = torch.randn(1, 6, D)
    mask = torch.ones(1, 6, dtype=torch.bool)
    base = enc(x, mask)
    x2 = x.clone()
    x2[0, 5] += 10.0  # change the last token only
    changed = (enc(x2, mask) - base).abs().sum(-1)[0]
    assert (changed[:4] == 0).all() and (changed[4:] > 0).all()


def _sa(pos):
    torch.manual_seed(0)
    return SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, ffn_dim=16, pos_encoding=pos).eval()


def test_without_positions_permuting_tokens_permutes_outputs():
    enc = _sa("none")
    x, mask = torch.randn(1, 7, D), torch.ones(1, 7, dtype=torch.bool)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    assert torch.allclose(enc(x[:, perm], mask), enc(x, mask)[:, perm], atol=1e-5)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "relative"])
def test_with_positions_permuting_tokens_does_not_just_permute_outputs(pos):
    enc = _sa(pos)
    if pos == "learned":
        torch.nn.init.normal_(enc.positions.table.weight)
    if pos == "relative":
        torch.nn.init.normal_(enc.positions.bias.weight)
    x, mask = torch.randn(1, 7, D), torch.ones(1, 7, dtype=torch.bool)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    assert not torch.allclose(enc(x[:, perm], mask), enc(x, mask)[:, perm], atol=1e-3)


def test_a_convolutional_ffn_gives_order_without_positions():
    torch.manual_seed(0)
    enc = SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, ffn_dim=16, pos_encoding="none", ffn_kernel=3).eval()
    x, mask = torch.randn(1, 7, D), torch.ones(1, 7, dtype=torch.bool)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    assert not torch.allclose(enc(x[:, perm], mask), enc(x, mask)[:, perm], atol=1e-3)


@pytest.mark.parametrize("kernel", [0, 2])
def test_ffn_kernel_must_be_odd_and_positive(kernel):
    with pytest.raises(ValueError, match="model.ffn_kernel"):
        SelfAttentionEncoder(D, d_model=16, heads=2, ffn_kernel=kernel)


def test_relative_runs_beyond_training_length_and_learned_refuses():
    x, mask = torch.randn(1, 300, D), torch.ones(1, 300, dtype=torch.bool)
    assert _sa("relative")(x, mask).shape == (1, 300, 16)
    enc = SelfAttentionEncoder(D, d_model=16, heads=2, pos_encoding="learned", max_len=64)
    with pytest.raises(ValueError, match="model.max_len=64"):
        enc(x, mask)


def test_attention_weights_per_layer_and_head():
    enc = _sa("relative")
    x, mask = torch.randn(2, 5, D), torch.ones(2, 5, dtype=torch.bool)
    h, weights = enc(x, mask, need_weights=True)
    assert len(weights) == 2 and weights[0].shape == (2, 2, 5, 5)


@pytest.mark.parametrize("pos", ["alibi", "relative", "sinusoidal"])
def test_masks_shared_across_layers_keep_each_layers_window(pos):
    """The fused path builds each window's masks once per pass for all layers; with a different window per layer
    and padding it gives what the reference path (one mask per layer, need_weights) gives."""
    torch.manual_seed(0)
    enc = SelfAttentionEncoder(D, d_model=16, heads=2, layers=3, ffn_dim=16, window=[1, None, 1], dropout=0.0,
                               attn_dropout=0.0, pos_encoding=pos).eval()
    x = torch.randn(3, 7, D)
    mask = torch.arange(7) < torch.tensor([7, 4, 2])[:, None]  # (3,7)
    fused = enc(x, mask)
    reference, _ = enc(x, mask, need_weights=True)
    assert torch.allclose(fused[mask], reference[mask], atol=1e-5)


def test_window_per_layer_local_below_whole_input_on_top():
    enc = SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, ffn_dim=16, window=[1, None], dropout=0.0,
                               attn_dropout=0.0).eval()
    x, mask = torch.randn(1, 6, D), torch.ones(1, 6, dtype=torch.bool)
    _, (low, top) = enc(x, mask, need_weights=True)  # each (1,heads,6,6)
    far = (torch.arange(6)[:, None] - torch.arange(6)[None, :]).abs() > 1  # (6,6)
    assert low[0][:, far].abs().max() == 0  # layer 1 sees only ±1
    assert top[0][:, far].min() > 0  # layer 2 sees every token
    with pytest.raises(ValueError, match=r"model.window.*model.layers=2"):
        SelfAttentionEncoder(D, d_model=16, heads=2, layers=2, window=[3, None, 3])


@pytest.mark.parametrize("name,enc", list(itertools.islice(encoders(), 3)),  # window_fc, bilstm, self-attention
                         ids=lambda v: v if isinstance(v, str) else "")
def test_encoders_declare_whether_they_have_attention_weights(name, enc):
    from tagger.models.heads import SoftmaxHead
    from tagger.models.tagger import AttentionNotSupported, Tagger

    class WordsOnly(torch.nn.Embedding):  # the embedder's interface: (words, chars) -> (B,T,D)
        def forward(self, words, chars):
            return super().forward(words)

    assert type(enc).has_attention is name.startswith("sa-")  # a class attribute of every encoder
    tagger = Tagger(WordsOnly(20, D), enc, SoftmaxHead(enc.output_dim, labels=["A", "B"])).eval()
    assert tagger.supports_attention is enc.has_attention
    batch = {"words": torch.ones(1, 5, dtype=torch.long), "chars": torch.ones(1, 5, 3, dtype=torch.long),
             "mask": torch.ones(1, 5, dtype=torch.bool)}
    if enc.has_attention:
        assert [w.shape for w in tagger.attention(batch)] == [(1, 2, 5, 5)] * 2  # per layer (B,heads,T,T)
    else:
        with pytest.raises(AttentionNotSupported, match=type(enc).__name__):
            tagger.attention(batch)
