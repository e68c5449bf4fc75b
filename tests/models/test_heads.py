"""tagger.models.heads: ``tags`` gives decode's tags, and the CRF's without computing its marginals."""
from __future__ import annotations

import pytest
import torch

from tagger.models.heads import CRFHead, SoftmaxHead

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.mark.parametrize("head_class", [SoftmaxHead, CRFHead])
@pytest.mark.parametrize("with_starts", [False, True])
def test_tags_are_decodes_tags(head_class, with_starts):
    torch.manual_seed(0)
    head = head_class(6, LABELS, "IOB2").eval()
    with torch.no_grad():
        for p in head.parameters():
            p.normal_()
    h = torch.randn(4, 9, 6)  # (B,T,H)
    mask = torch.arange(9) < torch.tensor([9, 5, 1, 7]).unsqueeze(1)  # (B,T)
    starts = (torch.arange(9) == 3).expand(4, 9) & mask if with_starts else None
    pred, _ = head.decode(h, mask, starts)
    assert torch.equal(head.tags(h, mask, starts), pred)
    assert (pred[~mask] == 0).all()


def test_crf_tags_skip_the_marginals(monkeypatch):
    head = CRFHead(6, LABELS, "IOB2")
    monkeypatch.setattr(head.crf, "marginals", lambda *a, **k: pytest.fail("tags computed the marginals"))
    assert head.tags(torch.randn(2, 4, 6), torch.ones(2, 4, dtype=torch.bool)).shape == (2, 4)
