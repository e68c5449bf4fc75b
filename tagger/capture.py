"""An encoder captured as TorchScript (``torch.jit.trace``): a forward pass in one call, with the GIL released.

Run eagerly, a pass of the self-attention encoder is some sixty torch calls from Python, each of which gives the GIL
back and takes it again. Traced, the pass is one call into TorchScript's interpreter, which runs the same kernels
in C++ without the GIL. That removes the Python cost per op (it dominated calls of a few sentences), and in the
service the model thread no longer waits for the event loop's thread between ops (``reports/bench.md`` measures
both).

A trace records the ops of one example run, so it holds for inputs on which the module runs the same ops. The
self-attention encoder picks its attention kernel by input length (:data:`tagger.models.attention.GEMM_MAX_LEN`),
so :class:`CapturedEncoder` keeps one trace for inputs up to that length and one for longer ones. Each trace is
checked against the eager module on batches of other shapes, with padding; :func:`capture_encoder` keeps the eager
module (and logs why) where a trace does not reproduce it.

Hand-written only as the glue around ``torch.jit.trace``: which example inputs to trace and check, and when to
fall back.
"""
from __future__ import annotations

import logging
import warnings

import torch
import torch.nn as nn

from tagger.models.attention import GEMM_MAX_LEN

log = logging.getLogger(__name__)

# (batch, length) of the example each trace is recorded on, and of the batches it is checked on, per length range
SHORT_EXAMPLE, LONG_EXAMPLE = (3, 9), (2, GEMM_MAX_LEN + 8)
SHORT_CHECKS = ((1, 1), (2, 5), (5, 31), (2, GEMM_MAX_LEN))
LONG_CHECKS = ((1, GEMM_MAX_LEN + 1), (2, 2 * GEMM_MAX_LEN + 3))


class CaptureError(RuntimeError):
    """A trace that does not reproduce its eager module."""


def example(batch: int, length: int, features: int, dtype: torch.dtype,
            seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random batch x (batch,length,features) and a mask (batch,length) whose rows after the first are padded."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, features, generator=g).to(dtype)  # (B,T,F)
    lengths = torch.tensor([length] + [max(1, length - 1 - 3 * i) for i in range(batch - 1)])  # (B,)
    return x, torch.arange(length)[None, :] < lengths[:, None]  # (B,T), (B,T)


def _trace(encoder: nn.Module, shape: tuple[int, int], checks: tuple[tuple[int, int], ...], features: int,
           dtype: torch.dtype, max_len: int | None) -> torch.jit.ScriptModule:
    """encoder traced on an example of ``shape``; CaptureError unless it equals the eager module on ``checks``."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the shape reads it lists are what the checks test
        traced = torch.jit.trace(encoder, example(*shape, features, dtype), check_trace=False)
        for i, (batch, length) in enumerate(checks):
            if max_len is not None and length > max_len:
                continue
            x, mask = example(batch, length, features, dtype, seed=i + 1)
            try:
                torch.testing.assert_close(traced(x, mask), encoder(x, mask))
            except Exception as e:  # a mismatch, or an op the trace fixed to the example's shape failing
                raise CaptureError(f"trace on {shape} differs from the module on (batch, length)={batch, length}: "
                                   f"{str(e).splitlines()[0]}") from e
    return traced


class CapturedEncoder(nn.Module):
    """x (B,T,F), mask (B,T) -> h (B,T,H) as ``encoder`` gives it, by the trace of T's length range."""

    def __init__(self, encoder: nn.Module, features: int, dtype: torch.dtype):
        super().__init__()
        max_len = getattr(encoder, "max_len", None)
        self.short = _trace(encoder, SHORT_EXAMPLE, SHORT_CHECKS, features, dtype, max_len)
        # a model limited to GEMM_MAX_LEN tokens (learned positions) never sees a longer input
        long_ok = max_len is None or max_len > GEMM_MAX_LEN
        self.long = _trace(encoder, LONG_EXAMPLE, LONG_CHECKS, features, dtype, max_len) if long_ok else None
        self.output_dim = encoder.output_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if x.shape[1] <= GEMM_MAX_LEN or self.long is None:
            return self.short(x, mask)  # (B,T,H)
        return self.long(x, mask)  # (B,T,H)


def capture_encoder(graph: nn.Module, dtype: torch.dtype) -> nn.Module:
    """``graph`` (an :class:`tagger.inference.InferenceGraph` or a copy of it in another precision) with its encoder
    replaced by a :class:`CapturedEncoder`, in place; left eager, with a warning in the log, where tracing fails or
    the trace differs from the module. The tagger the graph was made from keeps its own encoder."""
    try:
        graph.encoder = CapturedEncoder(graph.encoder.eval(), graph.embedder.output_dim, dtype)
    except Exception as e:  # noqa: BLE001 - any failure to trace leaves the (correct) eager module in place
        log.warning("encoder %s runs eagerly: tracing it failed (%s)", type(graph.encoder).__name__, e)
    return graph
