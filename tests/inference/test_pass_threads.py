"""Passes side by side (tagger.inference.pass_threads): each pass thread runs torch with its own intra-op thread count,
and a predictor with streams tags as one without."""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import tagger.inference.pass_threads
from tagger.artifacts.checkpoint import load_checkpoint
from tagger.inference.backends import make_predictor
from tagger.inference.pass_threads import PassThreads, PassThreadsError

SENTS = [["the", "cat", "sees", "a", "tree"], ["a", "red", "car", "likes", "the", "old", "house", "."], ["dog"],
         ["an", "unseen-word", "", "x" * 60], ["the", "big", "dog", "sees", "the", "small", "cat"], [],
         ["the", "cat"] * 20]  # 40 tokens: windows of a predictor with window=16


@pytest.fixture
def two_threads():
    keep = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(keep)


def test_pass_threads_have_their_own_intra_op_count_and_the_rest_keep_theirs(two_threads):
    threads = PassThreads(2)
    assert threads.threads_each == 1
    assert threads.map(lambda _: torch.get_num_threads(), range(6)) == [1] * 6
    assert torch.get_num_threads() == 2
    with ThreadPoolExecutor(1) as later:  # a thread started afterwards takes the process's count, not the pass threads'
        assert later.submit(torch.get_num_threads).result() == 2


def test_map_keeps_the_order_and_runs_in_inference_mode_on_the_pass_threads(two_threads):
    out = PassThreads(2).map(lambda i: (i, torch.is_inference_mode_enabled(), threading.current_thread().name),
                             range(9))
    assert [i for i, _, _ in out] == list(range(9))
    assert all(mode for _, mode, _ in out)
    assert {name.split("_")[0] for _, _, name in out} == {"tagger-pass"}


@pytest.fixture
def one_shared_count(two_threads, monkeypatch):
    """torch made to behave as a build where every thread reads the process's one intra-op count (once the predictor
    that needs the real count is built: call the fixture's value)."""
    shared = [2]

    def fake() -> None:
        monkeypatch.setattr(tagger.inference.pass_threads.torch, "set_num_threads", lambda n: shared.__setitem__(0, n))
        monkeypatch.setattr(tagger.inference.pass_threads.torch, "get_num_threads", lambda: shared[0])

    return fake


def test_a_torch_build_with_one_shared_thread_count_is_refused(one_shared_count):
    one_shared_count()
    with pytest.raises(PassThreadsError, match=r"pass threads read \[2, 2\], expected 1"):
        PassThreads(2)


def test_a_predictor_on_such_a_build_runs_its_passes_one_after_another(tiny_pos_run, one_shared_count, caplog):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    want = make_predictor(loaded.tagger, loaded.vocab, "fp32", streams=1, batch_size=2).predict(SENTS)
    one_shared_count()
    p = make_predictor(loaded.tagger, loaded.vocab, "fp32", streams=2, batch_size=2)
    assert p.streams is None and "passes run one after another" in caplog.text
    _same(p.predict(SENTS), want)


def _same(got, want) -> None:
    """The same tags; scores within float32 rounding (a kernel on one thread may sum in another order than on two)."""
    assert [[t.tag for t in s] for s in got] == [[t.tag for t in s] for s in want]
    assert [t.score for s in got for t in s] == pytest.approx([t.score for s in want for t in s], abs=1e-6)


@pytest.mark.parametrize("backend", ["fp32", "int8"])
def test_a_predictor_with_streams_tags_as_one_without(tiny_pos_run, two_threads, backend):
    """Small batches so that a call makes several passes, a sentence cut into windows, an empty one; the second call
    finds every word in the table."""
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    one = make_predictor(loaded.tagger, loaded.vocab, backend, streams=1, batch_size=2, window=16)
    two = make_predictor(loaded.tagger, loaded.vocab, backend, streams=2, batch_size=2, window=16)
    assert one.streams is None and two.streams.count == 2
    want = one.predict(SENTS)
    _same(two.predict(SENTS), want)
    _same(two.predict(SENTS), want)


def test_a_document_model_with_streams_tags_as_without(tiny_ner_run, two_threads):
    """A CRF model tagging documents: windows that join sentences take the encoder + decode path."""
    loaded = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    docs = ["a", "a", "b", "b", "b", "c", "d"]
    one = make_predictor(loaded.tagger, loaded.vocab, "int8", streams=1, batch_size=1)
    two = make_predictor(loaded.tagger, loaded.vocab, "int8", streams=2, batch_size=1)
    _same(two.predict(SENTS, docs), one.predict(SENTS, docs))


def test_streams_default_to_at_most_one_per_intra_op_thread(tiny_pos_run):
    loaded = load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    keep = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert make_predictor(loaded.tagger, loaded.vocab, "fp32").streams is None
        torch.set_num_threads(2)
        assert make_predictor(loaded.tagger, loaded.vocab, "fp32").streams.threads_each == 1
    finally:
        torch.set_num_threads(keep)


def test_a_forked_child_starts_its_own_pass_threads(two_threads):
    """Threads do not survive a fork: a child that maps on its parent's pass threads gets threads of its own, not a wait
    on threads it does not have."""
    threads = PassThreads(2)
    threads.map(abs, [-1, -2])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer within the parent's timeout, whatever happens
        code = 1
        try:
            os.write(write, repr(threads.map(lambda _: torch.get_num_threads(), range(4))).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child's map never returned")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert os.read(read, 100).decode() == "[1, 1, 1, 1]"
