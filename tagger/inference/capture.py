"""An encoder captured as TorchScript (``torch.jit.trace``): a forward pass in one call, with the GIL released.

Run eagerly, a pass of the self-attention encoder is some sixty torch calls from Python, each of which gives the GIL
back and takes it again. Traced, the pass is one call into TorchScript's interpreter, which runs the same kernels
in C++ without the GIL. That removes the Python cost per op (it dominated calls of a few sentences), and in the
service the model thread no longer waits for the event loop's thread between ops (``reports/bench.md`` measures
both).

A trace records the ops of one example run, so it holds for inputs on which the module runs the same ops. The
self-attention encoder picks its attention kernel by input length (:data:`tagger.models.attention.GEMM_MAX_LEN`),
so :class:`LengthSplit` keeps one trace for inputs up to that length and one for longer ones. Each trace is
checked against the eager module on batches of other shapes, with padding; where a trace does not reproduce it,
the eager module stays (and the log says why).

Two things are captured: the encoder of a torch backend (:func:`capture_encoder`), and, where the tag head traces
too (softmax; the CRF's Viterbi loops over positions do not), the whole pass from word-table rows to tags
(:class:`RowsToTags`, :func:`capture_rows_to_tags`): in the service every torch call of a pass waited ~1-3 ms for
the thread to run again beside the busy event loop, so one call per pass is what counts there.

Hand-written only as the glue around ``torch.jit.trace``: which example inputs to trace and check, and when to
fall back.
"""
from __future__ import annotations

import logging
import warnings
from typing import Callable

import torch
import torch.nn as nn

from tagger.models.attention import GEMM_MAX_LEN

log = logging.getLogger(__name__)

# (batch, length) of the example each trace is recorded on, and of the batches it is checked on, per length range
SHORT_EXAMPLE, LONG_EXAMPLE = (3, 9), (2, GEMM_MAX_LEN + 8)
SHORT_CHECKS = ((1, 1), (2, 5), (5, 31), (2, GEMM_MAX_LEN))
LONG_CHECKS = ((1, GEMM_MAX_LEN + 1), (2, 2 * GEMM_MAX_LEN + 3))
TABLE_ROWS = 50  # rows of the random word table the rows-to-tags pass is traced and checked on
# the DeprecationWarnings torch.jit.trace gives (torch 2.13; a module's trace warns of trace_method too), a regex; any
# other message still shows
TRACE_DEPRECATION = (r"`torch\.jit\.trace(_method)?` is deprecated\. "
                     r"Please switch to `torch\.compile` or `torch\.export`\.")

Inputs = Callable[[int, int, int], tuple]  # (batch, length, seed) -> the module's inputs, (B,T) last


# assert_close's default (rtol, atol) per dtype; torch.testing itself is not imported: it adds ~47 MB to a process
TOLERANCE = {torch.float32: (1.3e-6, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}


class CaptureError(RuntimeError):
    """A trace that does not reproduce its eager module."""


def difference(got, want) -> str | None:
    """How the outputs ``got`` (a tensor or a tuple of them) differ from ``want``, or None where they match: the same
    shapes and dtypes, equal integers, floats within :data:`TOLERANCE`."""
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype} against {tuple(w.shape)} {w.dtype}"
        if g.is_floating_point():
            rtol, atol = TOLERANCE.get(g.dtype, (1e-5, 1e-8))
            if not torch.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                return f"output {i}: max |diff| {(g.float() - w.float()).abs().max().item():.3g}"
        elif not torch.equal(g, w):
            return f"output {i}: {int((g != w).sum())} values differ"
    return None if len(got) == len(want) else f"{len(got)} outputs against {len(want)}"


def _lengths(batch: int, length: int) -> torch.Tensor:
    """(batch,) lengths: the first row full, the others shorter (padded)."""
    return torch.tensor([length] + [max(1, length - 1 - 3 * i) for i in range(batch - 1)])


def example(batch: int, length: int, features: int, dtype: torch.dtype,
            seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random batch x (batch,length,features) and a mask (batch,length) whose rows after the first are padded."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, features, generator=g).to(dtype)  # (B,T,F)
    return x, torch.arange(length)[None, :] < _lengths(batch, length)[:, None]  # (B,T), (B,T)


def rows_example(batch: int, length: int, features: int, dtype: torch.dtype,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random word table (TABLE_ROWS,features) and ids (batch,length) of its rows, 0 (padding) after each length."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(TABLE_ROWS, features, generator=g).to(dtype)  # (N,F)
    ids = torch.randint(1, TABLE_ROWS, (batch, length), generator=g)  # (B,T)
    return table, ids.masked_fill(torch.arange(length)[None, :] >= _lengths(batch, length)[:, None], 0)


def _trace(module: nn.Module, inputs: Inputs, shape: tuple[int, int], checks: tuple[tuple[int, int], ...],
           max_len: int | None) -> torch.jit.ScriptModule:
    """module traced on ``inputs`` of ``shape``; CaptureError unless it gives what the module gives on ``checks``."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the shape reads it lists are what the checks test
        # torch.jit.trace is deprecated; docs/reference.md says why capture still uses it (a canary test holds it)
        warnings.filterwarnings("ignore", TRACE_DEPRECATION, DeprecationWarning)
        traced = torch.jit.trace(module, inputs(*shape, 0), check_trace=False)
        for i, (batch, length) in enumerate(checks):
            if max_len is not None and length > max_len:
                continue
            args = inputs(batch, length, i + 1)
            try:
                diff = difference(traced(*args), module(*args))
            except Exception as e:  # an op the trace fixed to the example's shape failing
                diff = str(e).splitlines()[0]
            if diff is not None:
                raise CaptureError(f"trace on {shape} differs from the module on (batch, length)={batch, length}: "
                                   f"{diff}")
    return traced


class LengthSplit(nn.Module):
    """``module`` traced twice: for inputs of at most GEMM_MAX_LEN positions and for longer ones; calls dispatch on
    the length (dimension 1) of the last input. ``inputs(batch, length, seed)`` makes example inputs."""

    def __init__(self, module: nn.Module, inputs: Inputs, max_len: int | None = None):
        super().__init__()
        self.short = _trace(module, inputs, SHORT_EXAMPLE, SHORT_CHECKS, max_len)
        # a model limited to GEMM_MAX_LEN tokens (learned positions) never sees a longer input
        long_ok = max_len is None or max_len > GEMM_MAX_LEN
        self.long = _trace(module, inputs, LONG_EXAMPLE, LONG_CHECKS, max_len) if long_ok else None

    def forward(self, *args: torch.Tensor):
        if args[-1].shape[1] <= GEMM_MAX_LEN or self.long is None:
            return self.short(*args)
        return self.long(*args)


class CapturedEncoder(LengthSplit):
    """x (B,T,F), mask (B,T) -> h (B,T,H) as ``encoder`` gives it, by the trace of T's length range."""

    def __init__(self, encoder: nn.Module, features: int, dtype: torch.dtype):
        super().__init__(encoder, lambda b, t, seed: example(b, t, features, dtype, seed),
                         getattr(encoder, "max_len", None))
        self.output_dim = encoder.output_dim


class RowsToTags(nn.Module):
    """table (N,F) of word features, ids (B,T) rows of it (0: padding) -> tag ids (B,T), their probabilities (B,T):
    the word table's gather, the encoder and the tag head's decoding in one module, so that traced it is one call."""

    def __init__(self, encoder: nn.Module, head: nn.Module):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, table: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mask = ids > 0  # (B,T): row 0 is padding
        h = self.encoder(table[ids], mask).float()  # (B,T,H), the head decodes in float32
        return self.head.decode(h, mask)  # (B,T), (B,T)


def capture_encoder(graph: nn.Module, dtype: torch.dtype) -> nn.Module:
    """``graph`` (an :class:`tagger.inference.predictor.InferenceGraph` or a copy of it in another precision) with its
    encoder replaced by a :class:`CapturedEncoder`, in place; left eager, with a warning in the log, where tracing fails
    or the trace differs from the module. The tagger the graph was made from keeps its own encoder."""
    try:
        graph.encoder = CapturedEncoder(graph.encoder.eval(), graph.embedder.output_dim, dtype)
    except Exception as e:  # noqa: BLE001 - any failure to trace leaves the (correct) eager module in place
        log.warning("encoder %s runs eagerly: tracing it failed (%s)", type(graph.encoder).__name__, e)
    return graph


def capture_rows_to_tags(encoder: nn.Module, head: nn.Module, features: int, dtype: torch.dtype) -> LengthSplit | None:
    """:class:`RowsToTags` of the eager ``encoder`` (features of ``dtype``) and ``head``, traced; None (the predictor
    then runs encoder and head apart) where it does not trace: a CRF head's decoding loops over positions."""
    try:
        return LengthSplit(RowsToTags(encoder.eval(), head.eval()),
                           lambda b, t, seed: rows_example(b, t, features, dtype, seed),
                           getattr(encoder, "max_len", None))
    except Exception as e:  # noqa: BLE001 - the encoder and head then run as two steps, as they do untraced
        log.info("no one-call pass for %s + %s: %s", type(encoder).__name__, type(head).__name__, e)
        return None
