"""serve.direct.DirectAPIs: the JSON APIs it is given are answered as BentoML's dispatch answers them, the rest
passes on. A fake service stands in for the tagging service, so each case is one ASGI call."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from serve.direct import SERVER_ERROR, DirectAPIs


class EchoIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    words: list[str] = Field(min_length=1)
    upper: bool = False


class EchoOut(BaseModel):
    words: list[str]
    count: int


class Fake:
    """The instance: its API returns an output model, a response of its own, or raises."""

    def __init__(self):
        self.calls = []

    async def echo(self, words: list[str], upper: bool = False):
        self.calls.append((words, upper))
        if words == ["boom"]:
            raise RuntimeError("the model failed")
        if words == ["teapot"]:
            return JSONResponse({"error": "short and stout"}, status_code=418)
        return EchoOut(words=[w.upper() if upper else w for w in words], count=len(words))


def _api(func, route="/echo", **flags):
    return SimpleNamespace(func=func, input_spec=EchoIn, route=route, ctx_param=flags.get("ctx_param"),
                           batchable=flags.get("batchable", False), is_stream=flags.get("is_stream", False))


@pytest.fixture
def client():
    fake = Fake()
    passed = []  # requests that reached the app behind the middleware

    async def fallback(request):
        passed.append((request.method, request.url.path))
        return PlainTextResponse("bentoml")

    app = Starlette(routes=[Route("/{path:path}", fallback, methods=["GET", "POST"])])
    service = SimpleNamespace(name="fake", apis={"echo": _api(Fake.echo)})
    app.add_middleware(DirectAPIs, service=service, apis=("echo",), instance=lambda: fake)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, fake, passed


def test_a_valid_body_is_answered_with_the_output_model_as_json(client):
    c, fake, passed = client
    r = c.post("/echo", json={"words": ["a", "b"], "upper": True})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {"words": ["A", "B"], "count": 2}
    assert r.headers["server"] == "BentoML Service/fake"
    assert fake.calls == [(["a", "b"], True)] and passed == []


def test_an_invalid_body_is_a_400_with_bentomls_error_body(client):
    c, fake, _ = client
    for body in (b'{"words": []}', b'{"words": ["a"], "extra": 1}', b"[1, 2", b""):
        r = c.post("/echo", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, body
        with pytest.raises(ValidationError) as expected:
            EchoIn.model_validate_json(body or b"{}")
        exc = expected.value
        assert r.json() == json.loads(json.dumps({"error": f"{exc.error_count()} validation error for EchoIn",
                                                  "detail": exc.errors(include_context=False, include_input=False)}))
    assert fake.calls == []


def test_a_response_the_method_returns_is_sent_as_it_is(client):
    c, _, _ = client
    r = c.post("/echo", json={"words": ["teapot"]})
    assert r.status_code == 418 and r.json() == {"error": "short and stout"}


def test_an_exception_is_logged_and_answered_500(client, caplog):
    c, _, _ = client
    with caplog.at_level(logging.ERROR, logger="serve.direct"):
        r = c.post("/echo", json={"words": ["boom"]})
    assert r.status_code == 500 and r.json() == {"error": SERVER_ERROR}
    assert "the model failed" in caplog.text  # the traceback is in the log, not in the answer


def test_other_methods_and_paths_go_on_to_bentoml(client):
    c, fake, passed = client
    assert c.get("/echo").text == "bentoml"
    assert c.post("/other", json={"words": ["a"]}).text == "bentoml"
    assert passed == [("GET", "/echo"), ("POST", "/other")] and fake.calls == []


@pytest.mark.parametrize("flag", [{"ctx_param": "ctx"}, {"batchable": True}, {"is_stream": True}])
def test_an_api_bentoml_must_dispatch_is_refused(flag):
    service = SimpleNamespace(name="fake", apis={"echo": _api(Fake.echo, **flag)})
    with pytest.raises(ValueError, match="BentoML must dispatch it"):
        DirectAPIs(None, service=service, apis=("echo",), instance=lambda: None)


def test_a_client_gone_before_the_end_of_its_body_gets_nothing():
    fake, sent = Fake(), []
    service = SimpleNamespace(name="fake", apis={"echo": _api(Fake.echo)})
    direct = DirectAPIs(None, service=service, apis=("echo",), instance=lambda: fake)
    messages = iter([{"type": "http.request", "body": b'{"words": ', "more_body": True}, {"type": "http.disconnect"}])

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    asyncio.run(direct({"type": "http", "method": "POST", "path": "/echo", "headers": []}, receive, send))
    assert sent == [] and fake.calls == []


@pytest.mark.parametrize("switch, on", [(None, False), ("1", True)])
def test_tracing_of_the_api_routes_and_the_access_log_are_off_unless_asked_for(tmp_path, switch, on):
    """BentoML's OpenTelemetry middleware (which records nothing at its default sample rate of 0) passes the API
    routes by unless TAGGER_TRACING=1, other routes are traced as BentoML traces them; BentoML's access log is off
    unless TAGGER_ACCESS_LOG=1."""
    check = ("import json, serve.service as s; from bentoml._internal.container import BentoMLContainer as C; "
             "s.TaggingService.inject_config(); urls = C.tracing_excluded_urls.get(); "
             "print(json.dumps({'access_log': C.api_server_config.logging.access.enabled.get(), 'skipped': "
             "{p: urls.url_disabled('http://127.0.0.1:3000' + p) for p in "
             "('/tag', '/entities', '/attention', '/tags', '/model', '/livez')}}))")
    env = {k: v for k, v in os.environ.items() if k not in ("TAGGER_TRACING", "TAGGER_ACCESS_LOG")}
    env.update(BENTOML_HOME=str(tmp_path), **({"TAGGER_TRACING": switch, "TAGGER_ACCESS_LOG": switch} if switch else {}))
    out = subprocess.run([sys.executable, "-c", check], env=env, cwd=Path(__file__).resolve().parents[2],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["access_log"] is on
    assert got["skipped"] == {"/tag": not on, "/entities": not on, "/attention": not on,
                              "/tags": False, "/model": False, "/livez": False}
