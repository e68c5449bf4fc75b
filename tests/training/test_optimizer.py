"""The configured optimizer (conf/optimizer/adamw.yaml): a fused AdamW, which must update as the for-loop one does."""
from __future__ import annotations

import torch
from hydra.utils import instantiate

from tests.conftest import compose


def test_configured_adamw_is_fused_and_updates_as_the_loop_implementation(tmp_path, tiny_data):
    factory = instantiate(compose([f"data_dir={tiny_data}"], tmp_path).optimizer)
    g = torch.Generator().manual_seed(0)
    shapes = [(50, 8), (8,), (3, 4, 5), (1,)]
    start = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(20)]
    runs = []
    for make in (factory, lambda params: torch.optim.AdamW(params, **{**factory.keywords, "fused": False,
                                                                       "foreach": False})):
        params = [p.clone().requires_grad_() for p in start]
        opt = make(params=params)
        for step in grads:
            for p, grad in zip(params, step):
                p.grad = grad.clone()
            opt.step()
        runs.append((opt, params))
    (fused, got), (_, expected) = runs
    assert fused.defaults["fused"]
    assert not torch.equal(got[0], start[0])  # the steps did move the parameters
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
