"""bench.loadgen's bodiless GET mode (the HTTP floor of make bench) against a local server."""
from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.loadgen import LoadResult, answered_5xx, run_load


class _Probe(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        status = 200 if self.path == "/livez" else 503
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Probe)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_get_mode_counts_every_200_as_answered(server):
    out = run_load(server + "/livez", 4, 0.5, [], get=True)
    assert out["requests"] > 0 and out["ok"] == out["requests"] and out["errors"] == 0
    assert out["tokens_per_s"] == 0 and out["tokens_per_sentence"] is None


def test_get_mode_counts_other_statuses_as_errors(server):
    out = run_load(server + "/down", 2, 0.3, [], get=True)
    assert out["requests"] > 0 and out["ok"] == 0 and out["error_kinds"] == {"http_503": out["requests"]}


def test_the_heap_is_frozen_only_while_the_load_runs(server, monkeypatch):
    import gc

    import bench.loadgen as loadgen

    seen = []
    real = loadgen._run

    async def spy(*args):
        seen.append(gc.get_freeze_count())
        return await real(*args)

    monkeypatch.setattr(loadgen, "_run", spy)
    run_load(server + "/livez", 2, 0.2, [], get=True)
    assert seen[0] > 0  # the client's heap was out of the collector's sight while it measured
    assert gc.get_freeze_count() == 0  # and is given back afterwards


def test_answered_5xx_counts_the_server_errors_the_clients_saw():
    result = LoadResult(clients=2, duration_s=1.0, sentences_per_request=1,
                        errors=Counter({"http_503": 2, "http_500": 1, "http_400": 4, "timeout": 1, "wrong_answer": 1}))
    assert answered_5xx(result.summary()) == 3
    assert answered_5xx(LoadResult(clients=1, duration_s=1.0, sentences_per_request=1).summary()) == 0
