"""Export a trained tagger's inference graph to ONNX and run it with ONNX Runtime.

:func:`export_onnx` (``tagger export``: :mod:`tagger.commands.export`) exports the
:class:`~tagger.inference.predictor.InferenceGraph` (embedder + encoder: words, types, type_chars, mask -> h)
and checks that ONNX Runtime computes what torch computes on probe batches of other shapes than the
one it was traced with. The tag head (softmax, or CRF Viterbi + marginals) stays in torch: it is a
few per-token operations, and the CRF's loop over positions is clearer there than in a graph.

A predictor on ONNX Runtime (or another backend) comes from :func:`tagger.inference.backends.make_predictor`.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from tagger.data.vocab import Vocab
from tagger.inference.predictor import InferenceGraph, encode_batch
from tagger.models.tagger import Tagger

log = logging.getLogger(__name__)

INPUTS = ("words", "types", "type_chars", "mask")
OUTPUT = "h"
OPSET = 18
# tolerance of the ONNX graph against torch on the encoder output; float32 re-association in fused
# kernels gives ~1e-6, a wrong graph (a baked-in shape, a dropped mask) gives O(1)
ATOL = RTOL = 1e-4
# (name, dynamo) in the order export_onnx tries them: the TorchScript-based one exports self-attention in a fraction of
# torch.export's time and is the only one that exports the BiLSTM (packed sequences); torch.export exports window_fc
EXPORTERS = (("torchscript", False), ("dynamo", True))
# what the exporters warn that export_onnx handles (regexes of the messages of torch 2.13; any other warning shows):
EXPORT_WARNINGS = (
    # the TorchScript-based exporter is deprecated: docs/reference.md says why it is still tried first
    (r"You are using the legacy TorchScript-based ONNX export\.", DeprecationWarning),
    (r"The feature will be removed\. Please remove usage of this function", DeprecationWarning),  # inside it
    # variable-length LSTM with batches over 1: the probes check ragged batches of several sentences
    (r"Exporting a model to ONNX with a batch_size other than 1, with a variable length with LSTM", UserWarning),
    # torch.export: B and T are shared by several inputs, on purpose
    (r"# The axis name: \w+ will not be used, since it shares the same shape constraints", UserWarning),
)


class ExportError(RuntimeError):
    """A tagger cannot be exported, or an exported graph is unreadable or disagrees with torch."""


def _probe_sentences(vocab: Vocab) -> list[list[list[str]]]:
    """Batches of shapes unlike the tracing batch: one token, ragged lengths, unseen and very long
    words (past ``max_word_chars``), a long sentence; each becomes a probe of the exported graph."""
    words = vocab.words[2:50] or ["x"]
    ragged = [words[i % len(words):][: 1 + (i * 7) % 23] or words[:1] for i in range(9)]
    odd = ["<never-seen>", "x" * 90, "Ünïcödé", "12,345.67", "https://example.com/" + "a" * 60]
    return [[[words[0]]], ragged, [odd, words[:3]], [(words * 8)[:120]]]


def _example_batch(vocab: Vocab) -> dict[str, torch.Tensor]:
    words = vocab.words[2:40] or ["x"]
    return encode_batch(vocab, [words[:11], words[5:12], words[:3] + ["<unseen>", "y" * 50]])


def _trace(graph: InferenceGraph, example: dict[str, torch.Tensor], dynamo: bool) -> bytes:
    args = tuple(example[k] for k in INPUTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # Python branches on shapes: the probes check them
        for message, category in EXPORT_WARNINGS:
            warnings.filterwarnings("ignore", message, category)
        if dynamo:
            B, T, U, L = (torch.export.Dim(n) for n in ("B", "T", "U", "L"))
            dims = {"words": {0: B, 1: T}, "types": {0: B, 1: T}, "type_chars": {0: U, 1: L}, "mask": {0: B, 1: T}}
            program = torch.onnx.export(graph, args, dynamo=True, input_names=list(INPUTS), output_names=[OUTPUT],
                                        dynamic_shapes=dims, opset_version=OPSET, verbose=False)
            return program.model_proto.SerializeToString()
        buf = io.BytesIO()
        axes = {"words": {0: "B", 1: "T"}, "types": {0: "B", 1: "T"}, "type_chars": {0: "U", 1: "L"},
                "mask": {0: "B", 1: "T"}, OUTPUT: {0: "B", 1: "T"}}
        with _native_output_to_log():
            torch.onnx.export(graph, args, buf, dynamo=False, input_names=list(INPUTS), output_names=[OUTPUT],
                              dynamic_axes=axes, opset_version=OPSET)
        return buf.getvalue()


@contextlib.contextmanager
def _native_output_to_log():
    """The TorchScript exporter switches its C++ log on whatever ``verbose`` says (torch 2.13 tests
    the function ``_jit_is_onnx_log_enabled`` for truth) and prints the whole IR graph to stdout when
    it fails; keep that out of the service's output (at DEBUG level instead)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            if text:
                log.debug("torch.onnx (TorchScript exporter) printed:\n%s", text)


class OnnxBackend:
    """A Predictor backend: encode_batch's tensors -> h (B,T,H) computed by ONNX Runtime.

    ``model``: the ONNX bytes or a path. ``threads``: ORT intra-op threads (default: torch's). Spinning
    worker threads are off so that, in a service, idle inference threads leave the CPU to the HTTP side.
    """

    name = "onnx"

    def __init__(self, model: bytes | str | Path, threads: int | None = None, spinning: bool = False):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or torch.get_num_threads()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.enable_mem_pattern = False  # every batch has a new shape; patterns would only pile up
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        opts.log_severity_level = 3
        source = str(model) if isinstance(model, (str, Path)) else "<bytes>"
        try:
            self.session = ort.InferenceSession(model if isinstance(model, bytes) else str(model), opts,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # ORT raises its own Fail/InvalidProtobuf/NoSuchFile types
            raise ExportError(f"cannot load ONNX model {source}: {type(e).__name__}: {e}") from e
        names = [i.name for i in self.session.get_inputs()]
        if sorted(names) != sorted(INPUTS):
            raise ExportError(f"{source}: expected inputs {list(INPUTS)}, the graph has {names}")
        self.threads = opts.intra_op_num_threads

    def __call__(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.session.run([OUTPUT], {k: batch[k].numpy() for k in INPUTS})[0]
        return torch.from_numpy(out)


def check_backend(graph: InferenceGraph, backend: OnnxBackend, vocab: Vocab) -> float:
    """Largest |torch - ONNX| over real tokens of the probe batches; ExportError past the tolerance."""
    worst = 0.0
    with torch.inference_mode():
        for sentences in _probe_sentences(vocab):
            batch = encode_batch(vocab, sentences)
            ref = graph(*(batch[k] for k in INPUTS))
            got = backend(batch)
            if got.shape != ref.shape:
                raise ExportError(f"ONNX output shape {tuple(got.shape)} != torch {tuple(ref.shape)} "
                                  f"for a batch of {len(sentences)} sentences")
            m = batch["mask"]
            worst = max(worst, float((got[m] - ref[m]).abs().max()))
            if not torch.allclose(got[m], ref[m], atol=ATOL, rtol=RTOL):
                raise ExportError(f"ONNX graph disagrees with torch by {worst:.3g} (tolerance {ATOL}) on a batch "
                                  f"of shape {tuple(batch['words'].shape)}")
    return worst


def export_onnx(tagger: Tagger, vocab: Vocab) -> tuple[bytes, dict[str, Any]]:
    """-> (ONNX bytes, info) for the tagger's InferenceGraph, checked against torch on the probes.

    Tries the TorchScript-based exporter first (self-attention and BiLSTM, with packed sequences as
    ONNX LSTM ``sequence_lens``), then torch.export (window_fc, whose ``unfold`` the first cannot
    size); the first whose graph agrees with torch wins. The TorchScript-based exporter is deprecated in torch: where
    it is gone, torch.export exports self-attention too (a test holds it to that), and the BiLSTM has no ONNX graph.
    """
    graph = InferenceGraph(tagger.eval(), char_buckets=()).eval()  # no Python-side grouping in the traced graph
    example = _example_batch(vocab)
    errors = []
    for exporter, dynamo in EXPORTERS:
        try:
            data = _trace(graph, example, dynamo)
            diff = check_backend(graph, OnnxBackend(data, threads=1), vocab)
        except Exception as e:  # noqa: BLE001 - each exporter fails in its own way; keep the reasons
            errors.append(f"{exporter}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            log.info("ONNX export with the %s exporter failed: %s", exporter, errors[-1])
            continue
        return data, {"exporter": exporter, "opset": OPSET, "max_abs_diff": diff, "bytes": len(data)}
    raise ExportError(f"{type(tagger.encoder).__name__}: no exporter produced a graph that agrees with torch: "
                      + "; ".join(errors))
