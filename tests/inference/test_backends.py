"""Inference backends (tagger.inference.backends): each gives the tags fp32 gives, on a test corpus, within a stated
tolerance, for a tagger trained from scratch and one trained with pretrained vectors."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.data.readers import read_conllu
from tagger.inference.backends import (BACKENDS, QUANTIZE_DYNAMIC_DEPRECATION, BackendError, bf16_native,
                                       make_predictor)
from tests.conftest import train_tiny
from tests.data.test_vectors import DIM, write_vectors

# tokens of the test corpus whose tag may differ from fp32's: none for ONNX Runtime in float32 (the export is
# checked to 1e-4), 1% for the reduced-precision backends; scores (probabilities) within these of fp32's
MAX_TAG_CHANGES = {"fp32": 0.0, "onnx": 0.0, "bf16": 0.01, "int8": 0.01, "onnx-int8": 0.01}
SCORE_ATOL = {"fp32": 1e-6, "onnx": 1e-4, "bf16": 0.05, "int8": 0.05, "onnx-int8": 0.05}


def train_with_vectors(tmp_path_factory, tiny_data, finetune: str):
    tmp = tmp_path_factory.mktemp(f"vectors_{finetune}")
    vec = write_vectors(tmp / "v.txt")
    return train_tiny(tmp / "run", tiny_data, [f"embedder.vectors={vec}", f"embedder.word_dim={DIM}",
                                               f"embedder.finetune_vectors={finetune}",
                                               "model=self_attention", "model.d_model=32", "model.heads=2",
                                               "model.ffn_dim=32", "trainer.max_epochs=6"])


# from scratch, and with vectors under each fine-tuning policy (none reads a found-mask buffer, concat doubles
# the word vector)
@pytest.fixture(scope="module", params=["scratch", "train_words", "none", "concat"])
def model_and_corpus(request, tiny_pos_run, tiny_data, tmp_path_factory):
    run = tiny_pos_run if request.param == "scratch" else train_with_vectors(tmp_path_factory, tiny_data, request.param)
    loaded = load_checkpoint(run / "checkpoints" / "best.ckpt")
    sentences = [s["tokens"] for s in read_conllu(tiny_data / "ud_english_ewt" / "en_ewt-ud-test.conllu")]
    # words only the vectors know, and words nobody knows, in the same positions
    sentences += [["the", "zebra", "sees", "a", "giraffe", "."], ["the", "okapi", "sees", "a", "quokka", "."]]
    reference = make_predictor(loaded.tagger, loaded.vocab, "fp32", capture=False).predict(sentences)  # eager
    return loaded, sentences, reference


def assert_tags_as_fp32(predictor, sentences, reference, backend: str) -> None:
    """``predictor``'s tags of ``sentences`` are fp32's (``reference``) within ``backend``'s tolerances."""
    got = predictor.predict(sentences)
    pairs = [(a, b) for s, r in zip(got, reference) for a, b in zip(s, r)]
    assert [len(s) for s in got] == [len(s) for s in sentences]
    changed = sum(a.tag != b.tag for a, b in pairs)
    # a share of the tokens, and at least one for a reduced precision (this corpus has under 100 tokens)
    allowed = max(MAX_TAG_CHANGES[backend] * len(pairs), 1 if MAX_TAG_CHANGES[backend] else 0)
    assert changed <= allowed, f"{changed} of {len(pairs)} tags differ from fp32"
    assert max(abs(a.score - b.score) for a, b in pairs) <= SCORE_ATOL[backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_tags_as_fp32_does(model_and_corpus, backend):
    loaded, sentences, reference = model_and_corpus
    if backend == "bf16" and not bf16_native():
        pytest.skip("this CPU has no native bf16")
    predictor = make_predictor(loaded.tagger, loaded.vocab, backend, threads=1)
    assert predictor.backend_name == backend
    assert_tags_as_fp32(predictor, sentences, reference, backend)


def _removed(*args, **kwargs):
    raise NotImplementedError("quantize_dynamic is gone from this torch")


# torch.ao.quantization is deprecated: int8 falls back where quantize_dynamic is missing or raises, to bf16 where the
# CPU has it natively, else to fp32
@pytest.mark.parametrize("native", [True, False], ids=["bf16-native", "no-bf16"])
@pytest.mark.parametrize("how", ["missing", "raising"])
def test_int8_falls_back_where_quantize_dynamic_is_gone(model_and_corpus, monkeypatch, caplog, how, native):
    import tagger.inference.backends

    if native and not bf16_native():
        pytest.skip("this CPU has no native bf16")
    loaded, sentences, reference = model_and_corpus
    monkeypatch.setattr(tagger.inference.backends, "bf16_native", lambda: native)
    if how == "missing":
        monkeypatch.delattr(torch.ao.quantization, "quantize_dynamic")
    else:
        monkeypatch.setattr(torch.ao.quantization, "quantize_dynamic", _removed)
    with caplog.at_level(logging.WARNING, logger="tagger.inference.backends"):
        predictor = make_predictor(loaded.tagger, loaded.vocab, "int8", threads=1)
    fallback = "bf16" if native else "fp32"
    assert predictor.backend_name == fallback
    assert f"backend int8 runs as {fallback}: torch.ao.quantization.quantize_dynamic failed" in caplog.text
    assert ("AttributeError" if how == "missing" else "NotImplementedError: quantize_dynamic is gone") in caplog.text
    assert_tags_as_fp32(predictor, sentences, reference, "int8")


def test_canary_quantize_dynamic_still_quantizes(model_and_corpus):
    """Canary of the deprecated torch.ao.quantization.quantize_dynamic that int8 runs on: fails when torch removes
    it, stops deprecating it, or changes its warning (docs/reference.md: what replaces it then)."""
    with pytest.warns(DeprecationWarning, match=QUANTIZE_DYNAMIC_DEPRECATION):
        q = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(4, 4)), {nn.Linear}, dtype=torch.qint8)
    assert isinstance(q[0], torch.ao.nn.quantized.dynamic.Linear)
    loaded, _, _ = model_and_corpus
    predictor = make_predictor(loaded.tagger, loaded.vocab, "int8", capture=False)
    assert predictor.backend_name == "int8"  # no fallback on this torch
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in predictor.backend.graph.encoder.modules())


def test_canary_mkldnn_bf16_op():
    """Canary of the private op bf16_native asks: fails when torch drops or renames it (bf16 would then be refused
    everywhere, by bf16_native's fallback, below)."""
    assert hasattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported")
    assert isinstance(torch.ops.mkldnn._is_mkldnn_bf16_supported(), bool)


def test_bf16_native_is_false_without_the_private_op(monkeypatch, caplog):
    monkeypatch.setattr(torch.ops, "mkldnn", SimpleNamespace())
    with caplog.at_level(logging.WARNING, logger="tagger.inference.backends"):
        assert bf16_native() is False
    assert "torch.ops.mkldnn._is_mkldnn_bf16_supported failed (AttributeError" in caplog.text


def test_quantized_copies_leave_the_model_float(model_and_corpus):
    loaded, sentences, reference = model_and_corpus
    for backend in ("int8", "bf16") if bf16_native() else ("int8",):
        make_predictor(loaded.tagger, loaded.vocab, backend)
        assert all(p.dtype == torch.float32 for p in loaded.tagger.parameters()), backend
    again = make_predictor(loaded.tagger, loaded.vocab, "fp32").predict(sentences)
    assert [[t.score for t in s] for s in again] == [[t.score for t in s] for s in reference]


def test_unknown_backend_is_named(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    with pytest.raises(BackendError, match="one of fp32, bf16, int8, onnx, onnx-int8; got 'tensorrt'"):
        make_predictor(loaded.tagger, loaded.vocab, "tensorrt")


def test_bf16_refused_without_native_support(tiny_pos_run, monkeypatch):
    import tagger.inference.backends

    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    monkeypatch.setattr(tagger.inference.backends, "bf16_native", lambda: False)
    with pytest.raises(BackendError, match="native bf16"):
        make_predictor(loaded.tagger, loaded.vocab, "bf16")


def test_the_api_takes_a_backend(tiny_pos_run):
    import tagger

    nlp = tagger.load(tiny_pos_run, backend="onnx", threads=1)
    assert nlp.predictor.backend_name == "onnx"
    assert nlp("the cat sees a dog .")[0].tags == tagger.load(tiny_pos_run)("the cat sees a dog .")[0].tags


def test_int8_word_rows_do_not_depend_on_the_words_new_beside_them(tiny_pos_run):
    """int8 quantizes the encoder only: a word's features (embedder, character CNN) stay float32, so its row in the
    word table is the same whichever words were new in the same batch (one int8 scale per batch would move it)."""
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    p = make_predictor(loaded.tagger, loaded.vocab, "int8")
    p.predict([["cat"]])
    alone = p.words.table[p.words.rows["cat"]].clone()
    p.forget_words()
    p.predict([["W" * 30, "cat", "zebra-like", "12,345.67", "ÉCOLE"]])
    assert torch.equal(p.words.table[p.words.rows["cat"]], alone)
