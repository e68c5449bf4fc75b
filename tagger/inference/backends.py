"""Inference backends: what computes the encoder output ``h`` (B,T,H) of a batch for a :class:`Predictor`.

``make_predictor(tagger, vocab, backend=...)`` is the one way to get a predictor on a backend:

* ``fp32``: the :class:`~tagger.inference.predictor.InferenceGraph` in torch, float32 (the reference);
* ``bf16``: a copy of the graph with its weights and activations in bfloat16 (cast once, not per call as
  ``torch.autocast`` would); offered only where the CPU computes bf16 natively (AVX512-BF16 or AMX), since
  emulated bf16 is slower than fp32;
* ``int8``: a copy of the graph whose encoder's ``nn.Linear`` layers are dynamically quantized to int8
  (``torch.ao.quantization.quantize_dynamic``: int8 weights, activations quantized with one scale per batch, so
  a sentence's scores depend slightly on the sentences batched with it); the word features (embeddings,
  character CNN) stay float32, so a word's row in the predictor's word table does not depend on the words
  that were new in the same batch, nor on the order in which passes met them. ``quantize_dynamic`` is deprecated in
  torch: where it is missing or fails, int8 runs as bf16 where the CPU has native bf16, else as fp32, and the log
  says why (the predictor's ``backend_name`` names what runs);
* ``onnx``: the graph exported to ONNX (:func:`tagger.inference.export.export_onnx`, checked against torch) and run by
  ONNX Runtime with all graph optimisations;
* ``onnx-int8``: that ONNX graph with its MatMul weights quantized to int8
  (``onnxruntime.quantization.quantize_dynamic``).

The torch backends run the encoder traced into one TorchScript call (:mod:`tagger.inference.capture`; ``capture=False``:
eagerly, module by module), and with a softmax head the whole pass from the word table's rows to tags as one call. bf16
and int8 run the graph with its convolutions unfolded into matrix products (:func:`tagger.models.conv.unfold_convs`), so
the character CNN and the convolutional FFN are bf16 GEMMs, and the convolutional FFN int8 Linears as well.

The tag head (softmax, or CRF Viterbi + marginals) always runs in torch fp32 on ``h``; so every backend runs a model of
several tasks (:class:`tagger.models.multitask.MultiTaskTagger`): one encoder pass, then each task's head on its output. ``make bench``
(``bench/backends.py`` in a checkout) measures each backend's accuracy and speed; the service runs ``TAGGER_BACKEND``,
default :data:`DEFAULT_BACKEND`.
"""
from __future__ import annotations

import copy
import logging
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a backend is built: the service's entry process checks names only
    import torch
    import torch.nn as nn

    from tagger.data.vocab import Vocab
    from tagger.inference.predictor import Predictor
    from tagger.models.tagger import Tagger

log = logging.getLogger(__name__)

BACKENDS = ("fp32", "bf16", "int8", "onnx", "onnx-int8")
# within 0.05 accuracy points of fp32 on EWT dev; in make bench (reports/bench.md) the fastest in batches of 256 and in
# calls of 1 and 16 sentences, and unlike bf16 it runs on every CPU
DEFAULT_BACKEND = "int8"
# the start of the DeprecationWarning torch.ao.quantization.quantize_dynamic gives (torch 2.10 to 2.13), a regex
QUANTIZE_DYNAMIC_DEPRECATION = r"torch\.ao\.quantization is deprecated and will be removed"
# and the warning torch gives once a process when quantize_dynamic makes its first int8 weight tensor
QUANTIZED_TENSOR_DEPRECATION = (r"torch\.quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor "
                                r"creation functions that produce tensors with dtype torch\.quint8, torch\.qint8, and "
                                r"torch\.qint32 are deprecated")


class BackendError(ValueError):
    """An unknown backend, or one this machine or model cannot run."""


def bf16_native() -> bool:
    """Whether the CPU has native bf16 arithmetic that oneDNN uses (AVX512-BF16 / AMX)."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return False
    try:  # a private op (torch's own tests and inductor ask it); tests/inference/test_backends.py holds it by a canary
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError) as e:  # gone or renamed: bf16 is then refused, never emulated
        log.warning("bf16 taken as not native: torch.ops.mkldnn._is_mkldnn_bf16_supported failed (%s: %s)",
                    type(e).__name__, e)
        return False


def _bf16_graph(tagger: Tagger) -> nn.Module:
    """A copy of the inference graph, convolutions unfolded, every floating tensor in bfloat16 (the tagger is left
    as is: its tensors are copied before they are cast)."""
    import torch

    from tagger.inference.predictor import InferenceGraph
    from tagger.models.conv import unfold_convs

    return unfold_convs(copy.deepcopy(InferenceGraph(tagger.eval()))).eval().to(torch.bfloat16)


def _int8_graph(tagger: Tagger) -> nn.Module:
    """A copy of the inference graph, convolutions unfolded, with int8 dynamically quantized Linear layers in its
    encoder (the tagger is left as is)."""
    import torch
    import torch.nn as nn

    from tagger.inference.capture import example
    from tagger.inference.predictor import InferenceGraph
    from tagger.models.conv import unfold_convs

    graph = unfold_convs(InferenceGraph(tagger.eval())).eval()  # shares the embedding tables with the tagger
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated; docs/reference.md says why int8 still uses it and what replaces it
        # when it goes. The message alone: any other warning of the call, or a changed message, still shows.
        warnings.filterwarnings("ignore", QUANTIZE_DYNAMIC_DEPRECATION, DeprecationWarning)
        warnings.filterwarnings("ignore", QUANTIZED_TENSOR_DEPRECATION, UserWarning)  # its int8 weights (once)
        graph.encoder = torch.ao.quantization.quantize_dynamic(graph.encoder, {nn.Linear}, dtype=torch.qint8,
                                                               inplace=True)
    with torch.inference_mode():  # a quantized Linear this build cannot run fails here, not in the first request
        graph.encode(*example(2, 5, graph.embedder.output_dim, torch.float32))
    return graph


def _int8_or_fallback(tagger: Tagger) -> tuple[nn.Module, str]:
    """(graph, backend name): the int8 graph, or, where ``torch.ao.quantization.quantize_dynamic`` is missing or fails,
    the bf16 graph where the CPU has native bf16, else the fp32 one, with a warning in the log naming why."""
    from tagger.inference.predictor import InferenceGraph

    try:
        return _int8_graph(tagger), "int8"
    except Exception as e:  # noqa: BLE001 - removed (AttributeError), no quantized engine (RuntimeError), ...
        fallback = "bf16" if bf16_native() else "fp32"
        log.warning("backend int8 runs as %s: torch.ao.quantization.quantize_dynamic failed (%s: %s)", fallback,
                    type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return (_bf16_graph(tagger) if fallback == "bf16" else InferenceGraph(tagger.eval())), fallback


def _onnx_int8(data: bytes) -> bytes:
    """The ONNX graph with int8 MatMul weights (ONNX Runtime's dynamic quantization)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="tagger-onnx-") as tmp:
        src, dst = Path(tmp) / "model.onnx", Path(tmp) / "model.int8.onnx"
        src.write_bytes(data)
        # MatMul only: the embedding tables (Gather) stay float, so rare words keep their exact vectors.
        # The quantizer logs a generic pre-processing hint on the root logger at WARNING; keep it out.
        root = logging.getLogger()
        level, root.level = root.level, logging.ERROR
        try:
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        finally:
            root.level = level
        return dst.read_bytes()


def check_backend(backend: str, what: str = "backend") -> None:
    """BackendError naming ``what`` unless ``backend`` is known and this machine can run it."""
    if backend not in BACKENDS:
        raise BackendError(f"{what} must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend == "bf16" and not bf16_native():
        import torch

        raise BackendError(f"{what} 'bf16' needs a CPU with native bf16 (AVX512-BF16 or AMX); this one "
                           f"({torch.backends.cpu.get_cpu_capability()}) would emulate it, slower than fp32")


def make_backend(tagger: Tagger, vocab: Vocab, backend: str = "fp32", threads: int | None = None,
                 capture: bool = True):
    """The backend named ``backend`` for this tagger (:data:`BACKENDS`); BackendError if it cannot run here.
    ``capture``: a torch backend runs its encoder traced (:func:`tagger.inference.capture.capture_encoder`), else
    eagerly."""
    import torch

    from tagger.inference.capture import CapturedEncoder, capture_encoder, capture_rows_to_tags
    from tagger.inference.predictor import InferenceGraph, TorchBackend

    check_backend(backend)
    # backend -> (graph, the backend it runs: int8 falls back where quantization fails)
    graphs = {"fp32": lambda: (InferenceGraph(tagger.eval()), "fp32"), "bf16": lambda: (_bf16_graph(tagger), "bf16"),
              "int8": lambda: _int8_or_fallback(tagger)}
    if backend in graphs:
        (graph, backend), rows_to_tags = graphs[backend](), None
        if capture:
            dtype, eager = torch.bfloat16 if backend == "bf16" else torch.float32, graph.encoder
            # rows to tags in one call is traced around one head: a model of several tasks runs the traced encoder
            # and then each head (tagger.inference.predictor.Predictor)
            if isinstance(capture_encoder(graph, dtype).encoder, CapturedEncoder) and vocab.tasks is None:
                rows_to_tags = capture_rows_to_tags(eager, tagger.head, graph.embedder.output_dim, dtype)
        return TorchBackend(graph, backend, rows_to_tags)
    try:
        from tagger.inference.export import ExportError, OnnxBackend, export_onnx
    except ImportError as e:  # pragma: no cover - onnx/onnxruntime are dependencies of the serve extra
        raise BackendError(f"backend {backend!r} needs onnx and onnxruntime: {e}") from e
    try:
        data, info = export_onnx(tagger, vocab)
        if backend == "onnx-int8":
            data = _onnx_int8(data)
        runner = OnnxBackend(data, threads=threads)
    except (ExportError, ImportError) as e:
        raise BackendError(f"backend {backend!r}: {e}") from e
    runner.name, runner.export_info = backend, info
    log.info("backend %s: %s exporter, max |diff| %.2g vs torch before quantization", backend, info["exporter"],
             info["max_abs_diff"])
    return runner


def make_predictor(tagger: Tagger, vocab: Vocab, backend: str = "fp32", threads: int | None = None,
                   capture: bool = True, streams: int | None = None, **predictor_kw: Any) -> Predictor:
    """A :class:`Predictor` on ``backend`` (:data:`BACKENDS`). ``threads``: ONNX Runtime intra-op threads (default:
    torch's), shared out between the streams; ``capture``: trace a torch backend's encoder
    (:mod:`tagger.inference.capture`); ``streams``: passes run side by side (:mod:`tagger.inference.pass_threads`;
    default :data:`tagger.limits.STREAMS`, at most torch's intra-op thread count); ``predictor_kw``: batch_size, window,
    overlap, max_word_chars, max_tokens, cache_size, pass_cost."""
    import torch

    from tagger.inference.predictor import Predictor
    from tagger.limits import STREAMS

    total = threads or torch.get_num_threads()
    streams = min(STREAMS, total) if streams is None else streams
    runner = make_backend(tagger, vocab, backend, max(1, total // streams) if streams > 1 else threads, capture)
    return Predictor(tagger, vocab, backend=runner, streams=streams, **predictor_kw)
