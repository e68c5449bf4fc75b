"""TokenConv and its matrix-product form (tagger.models.conv): the same numbers, the original module untouched."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tagger.models.conv import TokenConv, UnfoldedConv, unfold_convs


@pytest.mark.parametrize("kernel", [1, 3, 5])
def test_unfolded_conv_computes_the_convolution(kernel):
    torch.manual_seed(0)
    conv = TokenConv(6, 4, kernel, padding=kernel // 2)
    x = torch.randn(3, 7, 6)  # (B,T,d_in)
    # reference: the convolution written out, position by position, zeros past the edges
    padded = nn.functional.pad(x, (0, 0, kernel // 2, kernel // 2))
    expected = torch.stack([torch.einsum("bkd,odk->bo", padded[:, t:t + kernel], conv.weight) + conv.bias
                            for t in range(7)], dim=1)  # (B,T,d_out)
    assert torch.allclose(conv(x), expected, atol=1e-5)
    assert torch.allclose(UnfoldedConv(conv)(x), expected, atol=1e-5)


def test_one_token_and_no_bias():
    conv = TokenConv(5, 3, 3, padding=1, bias=False)
    x = torch.randn(2, 1, 5)
    assert torch.allclose(UnfoldedConv(conv)(x), conv(x), atol=1e-6)


def test_other_convolutions_are_refused():
    with pytest.raises(ValueError, match="same-length"):
        UnfoldedConv(TokenConv(4, 4, 3, padding=0))


def test_unfold_convs_copies_and_replaces_every_token_conv():
    model = nn.Sequential(TokenConv(4, 8, 3, padding=1), nn.GELU(), nn.Sequential(TokenConv(8, 4, 3, padding=1)))
    x = torch.randn(2, 6, 4)
    unfolded = unfold_convs(model)
    assert not any(isinstance(m, TokenConv) for m in unfolded.modules())
    assert sum(isinstance(m, UnfoldedConv) for m in unfolded.modules()) == 2
    assert sum(isinstance(m, TokenConv) for m in model.modules()) == 2  # the original keeps its convolutions
    assert torch.allclose(unfolded(x), model(x), atol=1e-5)


def test_the_copy_shares_the_tensors_it_does_not_replace():
    model = nn.Sequential(nn.Embedding(10, 4), TokenConv(4, 4, 3, padding=1))
    model.register_buffer("table", torch.randn(10, 4))
    unfolded = unfold_convs(model)
    assert unfolded[0].weight is model[0].weight and unfolded.table is model.table
    assert unfolded[0] is not model[0]  # the modules are copies: swapping one in the copy leaves the original
