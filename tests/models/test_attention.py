"""Attention: hand-worked scores, mask and window semantics, fused path == reference path."""
from __future__ import annotations

import math

import pytest
import torch

from tagger.models import attention
from tagger.models.attention import (AdditiveScore, DotScore, MultiHeadSelfAttention, ScaledDotScore,
                                     attention_mask)


def test_score_functions_against_hand_computation():
    q = torch.tensor([[[[1.0, 2.0]]]])  # (B=1,h=1,T=1,d=2)
    k = torch.tensor([[[[3.0, -1.0], [0.5, 0.5]]]])  # (1,1,S=2,2)
    assert torch.allclose(DotScore(2)(q, k), torch.tensor([[[[1.0, 1.5]]]]))
    assert torch.allclose(ScaledDotScore(2)(q, k), torch.tensor([[[[1.0, 1.5]]]]) / math.sqrt(2))
    add = AdditiveScore(2)
    with torch.no_grad():
        add.w_q.weight.copy_(torch.eye(2)); add.w_k.weight.copy_(torch.eye(2)); add.w_k.bias.zero_()
        add.v.weight.copy_(torch.tensor([[1.0, 1.0]]))
    expected = [math.tanh(4.0) + math.tanh(1.0), math.tanh(1.5) + math.tanh(2.5)]  # v·tanh(q + k)
    assert torch.allclose(add(q, k), torch.tensor([[[expected]]]), atol=1e-6)


def test_attention_mask_padding_and_window():
    mask = torch.tensor([[True, True, True, True, False]])
    allowed = attention_mask(mask, window=1)[0, 0]  # (T,T)
    expected = torch.tensor([
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1],  # padding query (output ignored): real keys in its window plus its diagonal
    ], dtype=torch.bool)
    assert torch.equal(allowed, expected)
    # a query whose window holds no real key still has its diagonal, so softmax never sees an empty row
    far = attention_mask(torch.tensor([[True, False, False, False, False]]), window=1)[0, 0]
    assert far.any(-1).all()


@pytest.mark.parametrize("score", ["scaled_dot", "dot", "additive"])
@pytest.mark.parametrize("window", [None, 1])
def test_weights_sum_to_one_over_real_keys_and_zero_elsewhere(score, window):
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4, score=score, window=window).eval()
    x = torch.randn(2, 6, 16)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    _, w = attn(x, mask, need_weights=True)  # (B,h,T,T)
    allowed = attention_mask(mask, window).expand_as(w)
    real_q = mask[:, None, :, None].expand_as(w)
    assert torch.allclose(w.sum(-1)[mask[:, None, :].expand(-1, 4, -1)], torch.ones(1), atol=1e-6)
    assert (w[~allowed & real_q] == 0).all()  # padding keys and keys outside the window get exactly 0
    assert w[:, :, :, 4:][:, :, :4][1].abs().max() == 0  # sentence 2's padding keys


@pytest.mark.parametrize("score", ["scaled_dot", "dot"])
@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("gemm_max_len", [0, 128], ids=["flash-kernel", "batched-gemm"])
def test_fused_fast_path_equals_reference_path(score, window, with_bias, gemm_max_len, monkeypatch):
    monkeypatch.setattr(attention, "GEMM_MAX_LEN", gemm_max_len)  # 7 tokens: 0 -> the flash kernel, 128 -> GEMMs
    kernel_calls = []
    sdpa = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", lambda *a, **kw: kernel_calls.append(1) or sdpa(*a, **kw))
    torch.manual_seed(1)
    attn = MultiHeadSelfAttention(32, 4, score=score, window=window, fast_path=True).eval()
    x = torch.randn(3, 7, 32)
    mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2, [True] + [False] * 6])
    bias = torch.randn(4, 7, 7) if with_bias else None
    fast, _ = attn(x, mask, bias)  # fused: no weights requested
    ref, w = attn(x, mask, bias, need_weights=True)  # reference path
    assert w is not None
    assert torch.allclose(fast[mask], ref[mask], atol=1e-5)
    assert len(kernel_calls) == (1 if gemm_max_len == 0 else 0)


def test_heads_attend_independently_and_output_projection_mixes():
    torch.manual_seed(2)
    attn = MultiHeadSelfAttention(8, 2).eval()
    x = torch.randn(1, 3, 8)
    mask = torch.ones(1, 3, dtype=torch.bool)
    y, w = attn(x, mask, need_weights=True)
    assert y.shape == (1, 3, 8) and w.shape == (1, 2, 3, 3)
    assert not torch.allclose(w[0, 0], w[0, 1])  # two heads, two attention patterns


def test_bad_dimensions_name_the_config_key():
    with pytest.raises(ValueError, match="model.d_model"):
        MultiHeadSelfAttention(30, 4)
    with pytest.raises(ValueError, match="model.score"):
        MultiHeadSelfAttention(32, 4, score="cosine")
    with pytest.raises(ValueError, match="model.window"):
        MultiHeadSelfAttention(32, 4, window=-1)
