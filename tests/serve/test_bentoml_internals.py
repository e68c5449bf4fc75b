"""serve.bentoml_internals on BentoML's real objects: the service's ASGI app as `bentoml serve` builds it, run in this
process (conftest.service_app), answers each request the same through DirectAPIs as through BentoML's own dispatch;
and canaries that fail when a BentoML release changes what the module relies on."""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
from typing import AsyncGenerator

import bentoml
import pytest
from pydantic import BaseModel

import serve.bentoml_internals as internals
from serve.bentoml_internals import COPIED, SERVER_ERROR, DirectAPIs, fix_bentoml_timeout, locate, openapi_document
from serve.schemas import TagRequest, TagResponse
from serve.service import TaggingService
from tests.serve.conftest import bentoml_dispatch, direct_apis

RECHECK = ("BentoML {version} changed {name}: compare it with what serve/bentoml_internals.py copies from it "
           "(DirectAPIs for the dispatch, _timeout_call for TimeoutMiddleware), bring the copy in line, then record "
           "the new hash in COPIED and the version in pyproject.toml's bentoml pin")


@pytest.fixture
def answered_directly(service_app, monkeypatch):
    """The bodies DirectAPIs answered itself, recorded from its real instance in the app."""
    direct, bodies = direct_apis(service_app.app), []
    answer = direct._answer

    async def recording(func, model, body):
        bodies.append(body)
        return await answer(func, model, body)

    monkeypatch.setattr(direct, "_answer", recording)
    return bodies


def both_ways(client, path: str, body: bytes, answered_directly: list[bytes]):
    """(answer through DirectAPIs, answer through BentoML's dispatch) of one POST, each as (status, headers, body)."""
    headers = {"content-type": "application/json"}
    direct = client.post(path, content=body, headers=headers)
    assert answered_directly[-1:] == [body], "DirectAPIs did not answer it (is the copied code unchanged?)"
    with bentoml_dispatch(client.app):
        dispatched = client.post(path, content=body, headers=headers)
    assert answered_directly.count(body) == 1, "DirectAPIs answered what BentoML should have"
    return [(r.status_code, dict(r.headers), r.content) for r in (direct, dispatched)]


VALID = [
    {"sentences": [["the", "big", "cat", "sees", "a", "dog", "."]]},
    {"sentences": [["a", "dog"], ["the", "old", "car", "likes", "this", "tree"]]},
    {"texts": ["The big cat sees a dog. A dog finds the house!"]},
    {"texts": ["John doesn't like the old car's colour, does he?", "  émoji 🙂 and 1,000.5  "]},
    {"sentences": [["the", "cat"] * 1500]},  # windowed by the model
]
INVALID = [  # each reaches the dispatch (BodyLimit passes it): invalid for the input model or for the method
    b"", b"{}", b"null", b"[1, 2]", b'"text"', b'{"texts": ["unterminated', b"{\"texts\": ['single']}",
    b'{"texts": ["ok"], "extra": 1}', b'{"sentences": "The cat"}', b'{"sentences": [["The", 3]]}',
    b'{"texts": [null]}', b'{"texts": null}', b'{"texts": [""]}', b'{"sentences": []}', b'{"sentences": [[]]}',
    b'{"sentences": [["a b"]]}', b'{"sentences": [["a"]], "texts": ["b"]}', b'{"texts": "The cat"}',
    json.dumps({"sentences": [["a"]] * 65}).encode(), json.dumps({"sentences": [["a"] * 5001]}).encode(),
    json.dumps({"sentences": [["x" * 1001]]}).encode(),
    b'{"texts": ["   "]}', json.dumps({"texts": ["a " * 5001]}).encode(),  # 400s the method returns
]


@pytest.mark.parametrize("request_body", VALID, ids=[f"valid{i}" for i in range(len(VALID))])
@pytest.mark.parametrize("path", ["/tag", "/entities"])
def test_a_valid_request_is_answered_as_bentoml_answers_it(service_app, answered_directly, path, request_body):
    body = json.dumps(request_body).encode()
    direct, dispatched = both_ways(service_app, path, body, answered_directly)
    assert direct == dispatched
    if path == "/tag":
        assert direct[0] == 200 and TagResponse.model_validate_json(direct[2]).results
    else:  # a POS model: the method's own 404 response, sent as it is
        assert direct[0] == 404 and "NER model" in json.loads(direct[2])["error"]


@pytest.mark.parametrize("body", INVALID, ids=[f"invalid{i}" for i in range(len(INVALID))])
def test_an_invalid_request_gets_bentomls_400(service_app, answered_directly, body):
    direct, dispatched = both_ways(service_app, "/tag", body, answered_directly)
    assert direct == dispatched
    status, _, content = direct
    assert status == 400 and set(json.loads(content)) == {"error", "detail"}


def test_an_exception_is_bentomls_500_and_its_traceback_is_logged(service_app, answered_directly, monkeypatch,
                                                                   caplog):
    async def fails(sentences):
        raise RuntimeError("the model failed")

    monkeypatch.setattr(bentoml.get_current_service(), "predict", fails)
    with caplog.at_level(logging.ERROR):
        direct, dispatched = both_ways(service_app, "/tag", b'{"texts": ["a cat"]}', answered_directly)
    assert direct == dispatched
    assert direct[0] == 500 and json.loads(direct[2]) == {"error": SERVER_ERROR}
    logged = [r for r in caplog.records if r.exc_info and str(r.exc_info[1]) == "the model failed"]
    assert len(logged) == 2  # with its traceback, both ways; never in the answer


def test_other_requests_go_on_to_bentoml(service_app, answered_directly):
    assert service_app.post("/attention", json={"tokens": ["the", "cat"]}).status_code == 200
    assert service_app.get("/tag").status_code == 405
    assert service_app.get("/model").json()["task"] == "pos"
    assert answered_directly == []


def test_a_client_gone_before_the_end_of_its_body_gets_nothing():
    called, sent = [], []
    direct = DirectAPIs(None, service=TaggingService, apis=("tag",), instance=lambda: called.append(1))
    messages = iter([{"type": "http.request", "body": b'{"texts": ', "more_body": True}, {"type": "http.disconnect"}])

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    asyncio.run(direct({"type": "http", "method": "POST", "path": "/tag", "headers": []}, receive, send))
    assert sent == [] and called == []


# -- canaries: what the module reads of BentoML is there, with the types it expects -----------------------------------
class Words(BaseModel):
    words: list[str]


@bentoml.service(name="dispatch-kinds")
class DispatchKinds:
    """One API of each kind BentoML dispatches in a way DirectAPIs does not copy."""

    @bentoml.api(input_spec=Words)
    async def plain(self, words: list[str]) -> list[str]:
        return words

    @bentoml.api(input_spec=Words)
    async def with_context(self, words: list[str], ctx: bentoml.Context) -> list[str]:
        return words

    @bentoml.api(batchable=True)
    def batched(self, words: list[str]) -> list[str]:
        return words

    @bentoml.api
    async def streamed(self, words: list[str]) -> AsyncGenerator[str, None]:
        for word in words:
            yield word


def test_the_api_methods_have_what_direct_apis_reads():
    for name in ("tag", "entities"):
        api = TaggingService.apis[name]
        assert api.route == f"/{name}" and api.func is getattr(TaggingService.inner, name).func
        assert inspect.iscoroutinefunction(api.func) and api.func.__name__ == name
        assert api.input_spec is TagRequest and issubclass(api.input_spec, BaseModel)
        assert set(inspect.signature(api.func).parameters) == {"self", *api.input_spec.model_fields}
        assert (api.ctx_param, api.batchable, api.is_stream) == (None, False, False)
    assert TaggingService.name == "tagger"


def test_the_api_methods_say_which_dispatch_direct_apis_does_not_copy():
    apis = DispatchKinds.apis
    assert (apis["plain"].ctx_param, apis["plain"].batchable, apis["plain"].is_stream) == (None, False, False)
    assert apis["with_context"].ctx_param == "ctx"
    assert apis["batched"].batchable is True and apis["streamed"].is_stream is True
    DirectAPIs(None, service=DispatchKinds, apis=("plain",))
    for name in ("with_context", "batched", "streamed"):
        with pytest.raises(ValueError, match="BentoML must dispatch it"):
            DirectAPIs(None, service=DispatchKinds, apis=(name,))


@pytest.mark.parametrize("name", sorted(COPIED))
def test_the_copied_bentoml_code_is_unchanged(name):
    assert internals.source_hash(name) == COPIED[name], RECHECK.format(version=bentoml.__version__, name=name)


def test_the_timeout_patch_is_applied():
    """serve.service applied it on import, since the middleware is the one copied."""
    middleware = locate(internals.TIMEOUT_MIDDLEWARE)
    assert middleware.__call__ is internals._timeout_call
    assert {"app", "timeout"} <= set(inspect.signature(middleware.__init__).parameters)
    assert callable(middleware._set_timer_out)


def test_a_changed_copy_is_not_used(monkeypatch, caplog):
    """On a BentoML whose copied code differs, requests go through BentoML's own dispatch and its timeout middleware
    stays as it is, with a warning."""
    for name in COPIED:
        monkeypatch.setitem(COPIED, name, "0" * 64)
    with caplog.at_level(logging.WARNING, logger="serve.bentoml_internals"):
        assert DirectAPIs(None, service=TaggingService, apis=("tag",)).routes == {}
    assert "its copy is not used" in caplog.text
    middleware = locate(internals.TIMEOUT_MIDDLEWARE)
    monkeypatch.setattr(middleware, "__call__", lambda *args: None)
    original = middleware.__call__
    fix_bentoml_timeout()
    assert middleware.__call__ is original


def test_the_openapi_document_has_the_api_routes():
    document = openapi_document(TaggingService)
    assert {"/tag", "/entities", "/attention"} <= set(document["paths"])
    assert "requestBody" in document["paths"]["/tag"]["post"]
