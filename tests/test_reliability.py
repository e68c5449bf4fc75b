"""Reliability: a training killed mid-epoch resumes to the same result; a checkpoint write killed
half-way leaves the previous checkpoint intact; checkpoints and packaged models that are truncated,
corrupted or carry pickled code are refused with an error naming them (and the code never runs);
the predictor answers any list of tokens (property-based)."""
from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tagger.artifacts.checkpoint import CheckpointError, load_checkpoint, read_checkpoint
from tests.conftest import write_conllu

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


# -- kill and resume ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_matches_uninterrupted_run(tmp_path):
    """scripts/kill_and_resume.py (what `make kill-resume` runs on EWT) on a tiny corpus big enough
    that an epoch lasts long enough to be killed in the middle (200 steps)."""
    data = tmp_path / "data"
    (data / "ud_english_ewt").mkdir(parents=True)
    for split, n, seed in (("train", 800, 1), ("dev", 40, 2), ("test", 40, 3)):
        write_conllu(data / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu", n, seed)
    out = tmp_path / "kr"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "kill_and_resume.py"), "--out", str(out), "--tolerance", "5",
                        "--", f"data_dir={data}", "model=self_attention", "model.d_model=32", "model.heads=2",
                        "model.ffn_dim=32", "trainer.max_epochs=3", "data.batch_size=4", "threads=1",
                        "~callbacks.progress_bar", "+trainer.enable_progress_bar=false"],
                       cwd=REPO, capture_output=True, text=True, timeout=900, env=ENV)
    report = json.loads((out / "kill_resume.json").read_text())
    assert r.returncode == 0 and report["passed"], report["checks"]
    assert report["kill"]["returncode"] == -9 and report["killed_during_epoch"] == 1
    assert report["resumed"]["epochs"] == report["uninterrupted"]["epochs"] == 3
    assert not report["checkpoints_after_kill"]["temp_files"]


_KILL_MID_WRITE = textwrap.dedent("""
    import os, signal, sys, torch
    from tagger.training.lightning_module import AtomicCheckpointIO
    path = sys.argv[1]
    io = AtomicCheckpointIO()
    io.save_checkpoint({"generation": 1, "w": torch.ones(1000)}, path)
    real_save = torch.save
    def dying_save(obj, f):
        f.write(b"PK\\x03\\x04 half a checkpoint")  # some bytes reach the disk ...
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # ... then the process dies
    torch.save = dying_save
    io.save_checkpoint({"generation": 2, "w": torch.zeros(1000)}, path)
""")


def test_checkpoint_write_killed_half_way_leaves_the_previous_one_intact(tmp_path):
    path = tmp_path / "checkpoints" / "last.ckpt"
    r = subprocess.run([sys.executable, "-c", _KILL_MID_WRITE, str(path)], capture_output=True, text=True,
                       timeout=120, env=ENV)
    assert r.returncode == -9, r.stderr
    assert torch.load(path, weights_only=True)["generation"] == 1
    assert [p.name for p in path.parent.glob("*.ckpt")] == ["last.ckpt"]  # the half file is a hidden .tmp


# -- what a checkpoint may contain -------------------------------------------------------------
class _Payload:
    """Unpickling this would create the marker file: proof that pickled code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _poisoned_copy(good: Path, tmp_path: Path) -> tuple[Path, Path]:
    ckpt = torch.load(good, weights_only=True)
    marker = tmp_path / "pickled-code-ran"
    ckpt["callbacks"] = {"evil": _Payload(marker)}
    bad = tmp_path / "poisoned.ckpt"
    torch.save(ckpt, bad)
    return bad, marker


def test_checkpoint_with_pickled_code_is_refused_and_never_run(tiny_pos_run, tmp_path):
    bad, marker = _poisoned_copy(tiny_pos_run / "checkpoints" / "best.ckpt", tmp_path)
    with pytest.raises(CheckpointError, match="poisoned.ckpt"):
        load_checkpoint(bad)
    assert not marker.exists()


def test_resuming_training_from_a_poisoned_checkpoint_fails_without_running_it(tiny_pos_run, tiny_data, tmp_path):
    """Lightning's resume path (trainer.fit(ckpt_path=...)) loads with weights_only too."""
    bad, marker = _poisoned_copy(tiny_pos_run / "checkpoints" / "last.ckpt", tmp_path)
    r = subprocess.run([sys.executable, "-m", "tagger.train", f"data_dir={tiny_data}", "model=self_attention",
                        "model.d_model=32", "model.heads=2", "model.ffn_dim=32", "data.batch_size=8", "threads=1",
                        "trainer.max_epochs=9", "~callbacks.progress_bar", "+trainer.enable_progress_bar=false",
                        f"hydra.run.dir={tmp_path / 'resumed'}", f"ckpt_path={bad}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300, env=ENV)
    assert r.returncode != 0 and "weights_only" in r.stderr.replace("weights-only", "weights_only"), r.stderr[-2000:]
    assert not marker.exists()


def _torch_load_calls(root: Path):
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "pickle"):
                yield path.relative_to(REPO), node


def test_every_torch_load_in_the_code_is_weights_only():
    calls = [c for d in ("tagger", "serve", "scripts") if (REPO / d).is_dir() for c in _torch_load_calls(REPO / d)]
    assert calls, "expected at least tagger.artifacts.checkpoint.read_checkpoint"
    for path, node in calls:
        assert node.func.value.id == "torch", f"{path}:{node.lineno}: pickle.load"
        flags = {k.arg: k.value for k in node.keywords}
        assert isinstance(flags.get("weights_only"), ast.Constant) and flags["weights_only"].value is True, \
            f"{path}:{node.lineno}: torch.load without weights_only=True"


# -- corrupted files ---------------------------------------------------------------------------
def test_truncated_checkpoint_at_any_length_is_a_clear_error(tiny_pos_run, tmp_path):
    good = (tiny_pos_run / "checkpoints" / "best.ckpt").read_bytes()
    for i, cut in enumerate((0, 10, len(good) // 3, len(good) - 100, len(good) - 1)):
        p = tmp_path / f"cut{i}.ckpt"
        p.write_bytes(good[:cut])
        with pytest.raises(CheckpointError, match=p.name):
            read_checkpoint(p)


def test_flipped_bytes_inside_a_checkpoint_are_detected(tiny_pos_run, tmp_path):
    good = (tiny_pos_run / "checkpoints" / "best.ckpt").read_bytes()
    ref = torch.load(tiny_pos_run / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]
    rng = random.Random(0)
    for i in range(20):
        data = bytearray(good)
        data[rng.randrange(len(data))] ^= 0x10
        p = tmp_path / f"flip{i}.ckpt"
        p.write_bytes(bytes(data))
        try:
            got = read_checkpoint(p)["state_dict"]
        except CheckpointError:
            continue
        assert all(torch.equal(got[k], ref[k]) for k in ref), f"{p.name} loaded with different weights"


_DAMAGE_STORE_ENTRY = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import bentoml
    from tagger.artifacts.package_format import PackageError
    from tagger.artifacts.packaged import load_packaged

    def attempt():
        try:
            load_packaged(bentoml.models.get("tagger-test:latest"))
            return "loaded"
        except PackageError as e:
            return f"PackageError: {e}"

    folder = Path(bentoml.models.get("tagger-test:latest").path)
    out = {"intact": attempt()}
    for name, damage in (("weights.safetensors", lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 1]) + b[len(b) // 2 + 1:]),
                         ("vocab.json", lambda b: b[:100]), ("model.json", None)):
        part = folder / name
        original = part.read_bytes()
        part.unlink() if damage is None else part.write_bytes(damage(original))
        out[name] = attempt()
        part.write_bytes(original)
    print(json.dumps(out))
""")


def test_corrupted_model_store_entry_is_a_clear_error(tiny_pos_run, tmp_path):
    """Package a run into a private BentoML store, damage one part of the entry at a time, load it the
    way the service does (tagger.artifacts.packaged.load_packaged): an error naming the model, never a model."""
    env = {**ENV, "BENTOML_HOME": str(tmp_path / "bentoml"), "BENTOML_DO_NOT_TRACK": "True"}
    r = subprocess.run([sys.executable, "-m", "tagger.commands.package", str(tiny_pos_run), "--name", "tagger-test"],
                       cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-c", _DAMAGE_STORE_ENTRY], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["intact"] == "loaded"
    for part in ("weights.safetensors", "vocab.json", "model.json"):
        assert out[part].startswith("PackageError: tagger-test:"), (part, out[part])
    assert "sha256" in out["weights.safetensors"] and "missing" in out["model.json"]


# -- the service: fuzzing and load (slow: a real `bentoml serve`) -------------------------------
@pytest.fixture(scope="module")
def served(tiny_pos_run, tmp_path_factory):
    """The tiny POS run packaged into a private store and served (bench.loadgen.running_service)."""
    from bench.loadgen import running_service

    work = tmp_path_factory.mktemp("served")
    log = work / "service.log"
    with running_service(tiny_pos_run, work, 1, log, access_log=True) as (base, pid, env):
        yield base, pid, env, log


@pytest.mark.slow
def test_schemathesis_finds_no_server_error(served, tmp_path):
    """What `make fuzz` runs (more examples there): schema-derived valid and invalid bodies for every
    operation of the service's OpenAPI document; zero 5xx, by schemathesis and in the access log."""
    pytest.importorskip("schemathesis")
    from bench.loadgen import server_errors

    base, _, env, log = served
    exe = Path(sys.executable).with_name("schemathesis")
    r = subprocess.run([str(exe), "run", f"{base}/docs.json", "--checks", "not_a_server_error", "--max-examples", "40",
                        "--seed", "1", "--no-color", "--generation-database", "none", "--request-timeout", "60"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:]
    assert not server_errors(log), server_errors(log)[:3]


@pytest.fixture(scope="module")
def soak(served, tiny_data):
    """`make soak` (60 s on EWT), shortened: 32 closed-loop clients for 30 s."""
    from bench.loadgen import load_sentences, run_load

    base, pid, _, _ = served
    return run_load(base + "/tag", 32, 30.0, load_sentences(tiny_data), pid=pid)


@pytest.mark.slow
def test_service_under_32_clients_answers_everything(soak):
    assert soak["ok"] > 0
    assert soak["errors"] == 0, soak["error_kinds"]


@pytest.mark.slow
def test_service_memory_is_stable_under_32_clients(soak):
    assert soak["memory"]["stable"], soak["memory"]


# -- property-based: the predictor answers any tokens ------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

TOKEN = st.text(min_size=1, max_size=60)  # any unicode: emoji, combining marks, control characters, spaces
SENTENCES = st.lists(st.lists(TOKEN, min_size=0, max_size=40), min_size=0, max_size=6)


@pytest.fixture(scope="module")
def predictors(tiny_pos_run):
    from tagger.inference.backends import make_predictor
    from tagger.inference.predictor import Predictor

    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    return (Predictor(loaded.tagger, loaded.vocab, batch_size=4, window=16, overlap=4),
            make_predictor(loaded.tagger, loaded.vocab, "onnx", threads=1, batch_size=4, window=16, overlap=4),
            loaded.vocab.labels)


@hypothesis.settings(max_examples=60, deadline=None, suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(sentences=SENTENCES)
def test_predictor_tags_every_token_of_any_input(predictors, sentences):
    reference, fast, labels = predictors
    out = reference.predict(sentences)
    assert [len(s) for s in out] == [len(s) for s in sentences]
    assert all(t.tag in labels and 0.0 <= t.score <= 1.0 for s in out for t in s)
    onnx = fast.predict(sentences)
    for a, b in zip(out, onnx):
        assert [t.tag for t in a] == [t.tag for t in b]


def test_atomic_write_interrupted_by_an_error_keeps_the_old_file_and_no_temp(tmp_path):
    from tagger.fileio import atomic_open, write_text

    path = tmp_path / "vocab.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as f:
            f.write(b"half of the new")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]
    write_text(path, "new ü")
    assert path.read_text(encoding="utf-8") == "new ü" and oct(path.stat().st_mode & 0o777) != "0o600"
