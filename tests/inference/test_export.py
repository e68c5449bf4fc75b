"""The serving graph and its ONNX export: the fast paths must compute what the reference computes."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.data.encoding import collate, encode_sentence
from tagger.data.vocab import Vocab
from tagger.inference.predictor import InferenceGraph, Predictor, encode_batch
from tagger.models.tagger import build_tagger
from tests.conftest import compose

onnxruntime = pytest.importorskip("onnxruntime")

from tagger.inference.export import ExportError, OnnxBackend, export_onnx  # noqa: E402

SENTENCES = [
    ["the", "cat", "sees", "a", "tree"],
    ["a", "red", "car", "likes", "the", "old", "house", "."],
    ["dog"],
    ["Zebra", "x" * 70, "12,345", "Ünïcödé", "the", "cat"],  # unseen words, one past max_word_chars
]


def _vocab(task: str = "pos") -> Vocab:
    if task == "ner":
        return Vocab.build(SENTENCES, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "ner", "IOB2")
    return Vocab.build(SENTENCES[:3], ["DET", "NOUN", "VERB", "ADJ", "PUNCT"], "pos")


def _tagger(tmp_path, overrides: list[str], task: str = "pos"):
    from tagger.training.run import model_config

    config = model_config(compose(overrides, tmp_path))
    torch.manual_seed(0)
    vocab = _vocab(task)
    return build_tagger(config, vocab).eval(), vocab


TINY_SA = ["model=self_attention", "model.d_model=16", "model.heads=2", "model.ffn_dim=16"]
VARIANTS = {
    "sa-relative": TINY_SA,
    "sa-learned-concat": TINY_SA + ["model.pos_encoding=learned", "model.pos_combine=concat"],
    "sa-sinusoidal-window": TINY_SA + ["model.pos_encoding=sinusoidal", "model.window=2"],
    "sa-additive": TINY_SA + ["model.score=additive"],
    "sa-casing": TINY_SA + ["embedder.case_dim=4"],
    "bilstm": ["model=bilstm", "model.hidden_dim=8"],
    "window_fc": ["model=window_fc", "model.hidden_dim=16"],
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("buckets", [(), (8, 16), (1, 3, 5)])
def test_inference_graph_equals_tagger_encode(tmp_path, name, buckets):
    """Char CNN once per distinct word, its words grouped by length (``char_buckets``) or not == once per padded
    token position, for every encoder."""
    tagger, vocab = _tagger(tmp_path, VARIANTS[name])
    batch = collate([encode_sentence(vocab, s) for s in SENTENCES])
    fast = encode_batch(vocab, SENTENCES)
    assert torch.equal(fast["mask"], batch["mask"]) and torch.equal(fast["words"], batch["words"])
    with torch.inference_mode():
        ref = tagger.encode(batch)
    graph = InferenceGraph(tagger, char_buckets=buckets)
    widths = []  # the character width of each call of the CNN
    graph.embedder.spelling = lambda chars, f=graph.embedder.spelling: widths.append(chars.shape[-1]) or f(chars)
    with torch.inference_mode():
        got = graph(fast["words"], fast["types"], fast["type_chars"], fast["mask"])
    m = batch["mask"]
    torch.testing.assert_close(got[m], ref[m], atol=1e-5, rtol=1e-5)
    # one group per width that has words (lengths here: 0 for padding, 1 to 7, and one clipped to 40)
    assert widths == {(): [40], (8, 16): [8, 40], (1, 3, 5): [1, 3, 5, 40]}[buckets]


def test_encode_batch_shares_one_row_per_distinct_word():
    vocab = _vocab()
    b = encode_batch(vocab, [["the", "cat", "the"], ["cat"]])
    assert b["types"].tolist() == [[1, 2, 1], [2, 0, 0]]  # 0: padding's empty word
    assert b["type_chars"].shape == (3, 3) and b["type_chars"][0].eq(0).all()
    assert b["mask"].tolist() == [[True, True, True], [True, False, False]]


def _same_predictions(a: Predictor, b: Predictor, sentences) -> None:
    pa, pb = a.predict(sentences), b.predict(sentences)
    for sa, sb in zip(pa, pb):
        assert [t.tag for t in sa] == [t.tag for t in sb]
        assert [t.score for t in sa] == pytest.approx([t.score for t in sb], abs=1e-4)


# both exporter paths: TorchScript-based (self-attention; BiLSTM with packed sequences as LSTM
# sequence_lens) and torch.export (window_fc); each positional encoding and score function
ONNX_CASES = [("sa-relative", "softmax", "pos"), ("bilstm", "crf", "ner"), ("window_fc", "softmax", "pos"),
              ("sa-learned-concat", "softmax", "pos"), ("sa-sinusoidal-window", "crf", "ner"),
              ("sa-additive", "softmax", "pos"), ("sa-casing", "crf", "ner")]


@pytest.mark.parametrize("name,head,task", ONNX_CASES)
def test_onnx_backend_predicts_like_torch(tmp_path, name, head, task):
    tagger, vocab = _tagger(tmp_path, VARIANTS[name] + [f"head={head}"], task)
    data, info = export_onnx(tagger, vocab)
    assert info["max_abs_diff"] < 1e-4
    # canary of the deprecated TorchScript-based exporter: it still exports all but window_fc
    assert info["exporter"] == ("dynamo" if name == "window_fc" else "torchscript")
    onnx = Predictor(tagger, vocab, backend=OnnxBackend(data, threads=1), batch_size=2)
    assert onnx.backend_name == "onnx"
    _same_predictions(Predictor(tagger, vocab, batch_size=2), onnx, SENTENCES + [SENTENCES[1] * 20])


def test_torch_export_alone_exports_self_attention(tmp_path, monkeypatch):
    """Where the deprecated TorchScript-based exporter is gone, torch.export takes the self-attention models."""
    import tagger.inference.export

    monkeypatch.setattr(tagger.inference.export, "EXPORTERS", (("dynamo", True),))
    tagger_, vocab = _tagger(tmp_path, VARIANTS["sa-relative"] + ["head=softmax"])
    data, info = export_onnx(tagger_, vocab)
    assert info["exporter"] == "dynamo" and info["max_abs_diff"] < 1e-4
    _same_predictions(Predictor(tagger_, vocab), Predictor(tagger_, vocab, backend=OnnxBackend(data, threads=1)),
                      SENTENCES)


def test_export_cli_on_a_trained_run_and_reload(tiny_pos_run, tmp_path):
    out = tmp_path / "model.onnx"
    r = subprocess.run([sys.executable, "-m", "tagger.commands.export", str(tiny_pos_run), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["onnx"] == str(out) and out.stat().st_size == info["bytes"]
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    onnx = Predictor(loaded.tagger, loaded.vocab, backend=OnnxBackend(out, threads=1))
    assert onnx.tags([["the", "big", "cat", "sees", "a", "dog", "."]]) == [["DET", "ADJ", "NOUN", "VERB", "DET", "NOUN", "PUNCT"]]
    _same_predictions(Predictor(loaded.tagger, loaded.vocab), onnx, SENTENCES)


def test_export_takes_a_best_json_and_writes_beside_its_run(tiny_pos_run, tmp_path, capsys):
    from tagger.commands.export import main

    run = tmp_path / "run"
    shutil.copytree(tiny_pos_run, run)
    best = tmp_path / "report" / "best.json"
    best.parent.mkdir()
    best.write_text(json.dumps({"run_dir": str(run), "task": "pos"}))
    assert main([str(best)]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["onnx"] == str(run / "model.onnx") and info["checkpoint"] == str(run / "checkpoints" / "best.ckpt")
    assert (run / "model.onnx").stat().st_size == info["bytes"]


def test_truncated_or_foreign_onnx_file_is_a_clear_error(tiny_pos_run, tmp_path):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    data, _ = export_onnx(loaded.tagger, loaded.vocab)
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ExportError, match="cut.onnx"):
        OnnxBackend(cut)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(ExportError, match="garbage.onnx"):
        OnnxBackend(garbage)
    r = subprocess.run([sys.executable, "-m", "tagger.commands.export", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "not found" in r.stderr
