"""Encoders captured as TorchScript (tagger.inference.capture): the same outputs as the eager module at lengths and
batch sizes the trace never saw, and the eager module kept where a trace cannot reproduce it."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from tagger.inference.backends import bf16_native, make_predictor
from tagger.inference.capture import (TRACE_DEPRECATION, CapturedEncoder, capture_encoder, capture_rows_to_tags,
                                      difference, example, rows_example)
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.models.attention import GEMM_MAX_LEN
from tagger.models.heads import CRFHead, SoftmaxHead
from tagger.models.self_attention import SelfAttentionEncoder
from tests.models.test_encoders import D, encoders
from tests.inference.test_word_features import SENTS

# (batch, length) neither traced nor checked at capture: on both sides of the attention kernel's length switch
UNSEEN = ((1, 2), (4, 17), (3, 60), (2, GEMM_MAX_LEN + 1), (3, 150))


@pytest.mark.parametrize("name,enc", list(encoders()), ids=lambda v: v if isinstance(v, str) else "")
def test_captured_encoder_gives_what_the_module_gives(name, enc):
    enc.eval()
    captured = CapturedEncoder(enc, D, torch.float32)
    max_len = getattr(enc, "max_len", None)
    assert (captured.long is None) == (max_len is not None and max_len <= GEMM_MAX_LEN)
    with torch.no_grad():
        for i, (batch, length) in enumerate(UNSEEN):
            if max_len is not None and length > max_len:
                continue
            x, mask = example(batch, length, D, torch.float32, seed=100 + i)
            want = enc(x, mask)  # (B,T,H)
            got = captured(x, mask)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want)


ROWS_ENCODERS = [e for e in encoders() if e[0] in ("window_fc", "bilstm", "sa-ffn_kernel3")
                 or e[0].startswith("sa-scaled_dot-relative")]


@pytest.mark.parametrize("name,enc", ROWS_ENCODERS, ids=lambda v: v if isinstance(v, str) else "")
def test_rows_to_tags_gives_what_the_gather_encoder_and_softmax_head_give(name, enc):
    head = SoftmaxHead(enc.output_dim, ["A", "B", "C"]).eval()
    captured = capture_rows_to_tags(enc, head, D, torch.float32)
    assert captured is not None
    with torch.no_grad():
        for i, (batch, length) in enumerate(UNSEEN):
            table, ids = rows_example(batch, length, D, torch.float32, seed=200 + i)
            mask = ids > 0
            want_tags, want_probs = head.decode(enc(table[ids], mask), mask)  # (B,T), (B,T)
            got_tags, got_probs = captured(table, ids)
            assert torch.equal(got_tags, want_tags)
            torch.testing.assert_close(got_probs, want_probs)
            assert not got_probs[~mask].any()  # padding: probability 0, as the eager head gives it


def test_a_crf_head_gets_no_one_call_pass():
    """The CRF decodes with loops over positions: a trace holds for one length only, so the checks refuse it."""
    enc = SelfAttentionEncoder(D, d_model=16, heads=2, layers=1, ffn_dim=16).eval()
    assert capture_rows_to_tags(enc, CRFHead(16, ["O", "B-X", "I-X"], "IOB2").eval(), D, torch.float32) is None


class PaddingBranch(nn.Module):
    """Different ops on an unpadded batch: a trace recorded on a padded example is wrong on an unpadded one."""

    output_dim = D

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x * 2 if bool(mask.all()) else x


def test_an_encoder_the_trace_cannot_reproduce_stays_eager(caplog):
    encoder = PaddingBranch()
    graph = SimpleNamespace(encoder=encoder, embedder=SimpleNamespace(output_dim=D))
    with caplog.at_level(logging.WARNING, logger="tagger.inference.capture"):
        capture_encoder(graph, torch.float32)
    assert graph.encoder is encoder
    assert "PaddingBranch runs eagerly" in caplog.text and "differs from the module" in caplog.text


@pytest.mark.parametrize("backend", ["fp32", "int8", "bf16"])
def test_a_captured_backend_tags_as_the_eager_one(tiny_pos_run, backend):
    if backend == "bf16" and not bf16_native():
        pytest.skip("this CPU has no native bf16")
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    eager = make_predictor(loaded.tagger, loaded.vocab, backend, capture=False)
    captured = make_predictor(loaded.tagger, loaded.vocab, backend)
    assert isinstance(captured.backend.graph.encoder, CapturedEncoder)
    assert captured.rows_to_tags is not None  # a softmax head: word-table rows to tags in one call
    assert not isinstance(eager.backend.graph.encoder, CapturedEncoder) and eager.rows_to_tags is None
    assert not isinstance(loaded.tagger.encoder, CapturedEncoder)  # the tagger keeps its own module
    long_sentence = [SENTS[1][i % len(SENTS[1])] for i in range(GEMM_MAX_LEN + 20)]
    for sentences in (SENTS, SENTS[:1], [long_sentence]):
        want, got = eager.predict(sentences), captured.predict(sentences)
        assert [[t.tag for t in s] for s in got] == [[t.tag for t in s] for s in want]
        assert [t.score for s in got for t in s] == pytest.approx([t.score for s in want for t in s], abs=1e-6)


def test_canary_torch_jit_trace():
    """Canary of the deprecated torch.jit.trace that capture runs on: fails when torch removes it, stops deprecating it
    or changes its warning (docs/reference.md: what happens then). The predictor runs eagerly without it (below)."""
    linear = nn.Linear(3, 2).eval()
    with pytest.warns(DeprecationWarning, match=TRACE_DEPRECATION):
        traced = torch.jit.trace(linear, torch.randn(2, 3))
    x = torch.randn(4, 3)
    torch.testing.assert_close(traced(x), linear(x))


def test_without_torch_jit_trace_the_predictor_runs_eagerly(tiny_pos_run, monkeypatch, caplog):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    eager = make_predictor(loaded.tagger, loaded.vocab, "fp32", capture=False)
    monkeypatch.delattr(torch.jit, "trace")
    with caplog.at_level(logging.WARNING, logger="tagger.inference.capture"):
        untraced = make_predictor(loaded.tagger, loaded.vocab, "fp32")
    assert "runs eagerly: tracing it failed" in caplog.text
    assert not isinstance(untraced.backend.graph.encoder, CapturedEncoder) and untraced.rows_to_tags is None
    assert untraced.predict(SENTS) == eager.predict(SENTS)


def test_a_crf_model_captures_its_encoder_and_decodes_apart(tiny_ner_run):
    loaded = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    eager = make_predictor(loaded.tagger, loaded.vocab, "fp32", capture=False)
    captured = make_predictor(loaded.tagger, loaded.vocab, "fp32")
    assert isinstance(loaded.tagger.head, CRFHead)  # tests/conftest.py trains it with head=crf
    assert isinstance(captured.backend.graph.encoder, CapturedEncoder) and captured.rows_to_tags is None
    want, got = eager.predict(SENTS), captured.predict(SENTS)
    assert [[t.tag for t in s] for s in got] == [[t.tag for t in s] for s in want]


def test_difference_names_what_differs():
    x = torch.tensor([[1.0, 2.0]])
    assert difference(x, x + 1e-7) is None and difference((x, x.long()), (x, x.long())) is None
    assert "max |diff| 0.1" in difference(x, x + 0.1)
    assert "(1, 2) torch.float32 against (2, 1)" in difference(x, x.T)
    assert "1 values differ" in difference((x, torch.tensor([1, 2])), (x, torch.tensor([1, 3])))
    assert difference(x.bfloat16(), (x * 1.01).bfloat16()) is None  # within bf16's tolerance
