"""In-process pieces of the service: request validation, the body-limit middleware, entity spans (through /entities),
and the branches a tiny self-attention fixture cannot reach through HTTP."""
from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from serve.middleware import BodyLimit
from serve.schemas import LIMITS, AttentionRequest, TagRequest


@pytest.fixture(scope="module")
def service_module(tmp_path_factory):
    """serve.service imported against an empty model store (its import-time check finds nothing)."""
    from bentoml._internal.configuration.containers import BentoMLContainer
    from bentoml._internal.models import ModelStore

    BentoMLContainer.model_store.set(ModelStore(str(tmp_path_factory.mktemp("empty_store"))))
    import serve.service

    yield serve.service
    BentoMLContainer.model_store.reset()


def errors(model, payload) -> list[dict]:
    with pytest.raises(ValidationError) as info:
        model.model_validate_json(json.dumps(payload))
    return info.value.errors()


def test_valid_requests():
    assert TagRequest.model_validate_json('{"sentences": [["The", "cat"]]}').sentences == [["The", "cat"]]
    assert TagRequest.model_validate_json('{"texts": ["The cat."]}').texts == ["The cat."]
    assert AttentionRequest.model_validate_json('{"text": "The cat."}').text == "The cat."


@pytest.mark.parametrize("payload, loc, words", [
    ({"sentences": [["a"]], "nope": 1}, ("nope",), ["extra"]),
    ({"sentences": [["a", 1]]}, ("sentences", 0, 1), ["string"]),
    ({"sentences": [["a"]] * (LIMITS.sentences + 1)}, ("sentences",), ["TAGGER_MAX_SENTENCES"]),
    ({"sentences": [["a"] * (LIMITS.tokens + 1)]}, ("sentences",), ["TAGGER_MAX_TOKENS", "sentences[0]"]),
    ({"sentences": [["ok", "two words"]]}, ("sentences",), ["sentences[0][1]", "whitespace"]),
    ({"sentences": [["ok"], ["a", ""]]}, ("sentences", 1, 1), ["at least 1 character"]),
    ({"texts": [True]}, ("texts", 0), ["string"]),
    ({"texts": ["a"] * (LIMITS.sentences + 1)}, ("texts",), ["TAGGER_MAX_SENTENCES"]),
    ({}, (), ["exactly one"]),
])
def test_tag_request_errors_name_the_field(payload, loc, words):
    (err,) = errors(TagRequest, payload)
    assert tuple(err["loc"]) == loc
    for word in words:
        assert word.lower() in err["msg"].lower()


def test_attention_request_errors():
    (err,) = errors(AttentionRequest, {"tokens": ["a"] * (LIMITS.attention_tokens + 1)})
    assert err["loc"] == ("tokens",) and "TAGGER_MAX_ATTENTION_TOKENS" in err["msg"]
    (err,) = errors(AttentionRequest, {"text": "a", "tokens": ["a"]})
    assert "exactly one" in err["msg"]


def test_limits_come_from_the_settings(monkeypatch):
    from serve.schemas import Limits
    from serve.settings import SettingsError, load_settings

    monkeypatch.setenv("TAGGER_MAX_SENTENCES", "3")
    assert Limits.from_settings(load_settings()).sentences == 3
    monkeypatch.setenv("TAGGER_MAX_SENTENCES", "many")
    with pytest.raises(SettingsError, match="TAGGER_MAX_SENTENCES: Input should be a valid integer"):
        load_settings()


@pytest.fixture
def limited_app():
    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse({"bytes": len(body)})

    app = Starlette(routes=[Route("/tag", echo, methods=["POST"]), Route("/other", echo, methods=["POST", "GET"])])
    return TestClient(BodyLimit(app, max_bytes=100, paths=("/tag",)))


def test_middleware_passes_small_json_through(limited_app):
    r = limited_app.post("/tag", content=b'{"texts": ["ok"]}', headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json() == {"bytes": 17}
    assert limited_app.get("/other").status_code == 200


def test_middleware_rejects_big_bodies_with_or_without_length(limited_app):
    r = limited_app.post("/tag", content=b"x" * 101, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "100 bytes" in r.json()["error"]
    r = limited_app.post("/tag", content=iter([b"x" * 60, b"x" * 60]), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert limited_app.post("/other", content=b"x" * 101).status_code == 413  # every POST is bounded


def test_middleware_rejects_bad_utf8_and_content_types(limited_app):
    r = limited_app.post("/tag", content=b'{"t": "\xe9"}', headers={"content-type": "application/json"})
    assert r.status_code == 400 and "UTF-8" in r.json()["error"] and r.json()["detail"][0]["loc"] == ["body"]
    r = limited_app.post("/tag", content=b"{}", headers={"content-type": "multipart/form-data; boundary=x"})
    assert r.status_code == 415 and r.json()["detail"][0]["loc"] == ["content-type"]
    assert limited_app.post("/other", content=b"\xe9", headers={"content-type": "text/plain"}).status_code == 200


def _front(service_module, **metadata):
    svc = service_module.TaggingService.inner.__new__(service_module.TaggingService.inner)
    svc._info = {"tag": "tagger:test", "metadata": {"task": "pos", "supports_attention": True, **metadata},
                 "config": {"model": {"_target_": "tagger.models.bilstm.BiLSTMEncoder"}}, "window": 512}
    return svc


def _entities(service_module, tags: list[str], scheme: str = "IOB2", **given) -> list[tuple]:
    """/entities of one sentence or text whose tokens the model tags ``tags`` (scores 0.9, 0.7, 1.0, ...)."""
    svc = _front(service_module, task="ner", tag_scheme=scheme)
    svc._info["tokenizer"] = "conll"
    scores = [0.9, 0.7, 1.0, 0.5, 1.0, 0.8, 0.6]

    async def predict(sentences):
        (words,) = sentences
        assert len(words) == len(tags)
        return [list(zip(tags, scores))]

    svc.predict = predict
    response = asyncio.run(svc.entities(**given))
    return [(e.text, e.label, e.token_start, e.token_end, e.start, e.end, round(e.score, 4))
            for e in response.results[0].entities]


def test_entities_with_offsets_in_the_models_scheme(service_module):
    text = "Mary Smith met Anna in New York"
    tags = ["B-PER", "E-PER", "O", "S-PER", "O", "B-LOC", "E-LOC"]
    assert _entities(service_module, tags, "BIOES", texts=[text]) == [
        ("Mary Smith", "PER", 0, 2, 0, 10, 0.8), ("Anna", "PER", 3, 4, 15, 19, 0.5), ("New York", "LOC", 5, 7, 23, 31, 0.7)]


def test_entities_of_tokens_given_have_no_offsets_and_are_read_strictly(service_module):
    words = "Mary Smith met Anna in New York".split()
    tags = ["B-PER", "I-PER", "O", "O", "O", "B-LOC", "I-LOC"]
    assert [e[:2] + e[4:6] for e in _entities(service_module, tags, sentences=[words])] == [
        ("Mary Smith", "PER", None, None), ("New York", "LOC", None, None)]
    # strict IOB2, as scoring reads entities: an I- after O opens none
    strict = ["B-PER", "I-PER", "O", "I-PER", "O", "O", "I-LOC"]
    assert [e[:2] for e in _entities(service_module, strict, sentences=[words])] == [("Mary Smith", "PER")]


def test_attention_refused_for_models_without_attention(service_module):
    svc = _front(service_module, supports_attention=False)
    response = asyncio.run(svc.attention(tokens=["the", "cat"]))
    assert response.status_code == 404
    body = json.loads(response.body)
    assert "no attention weights" in body["error"] and "BiLSTMEncoder" in body["error"] and body["detail"][0]["loc"] == ["model"]


def test_entities_refused_for_pos_models(service_module):
    response = asyncio.run(_front(service_module, task="pos").entities(texts=["The cat."]))
    assert response.status_code == 404 and "NER model" in json.loads(response.body)["error"]


def test_attention_limited_by_the_model_window(service_module):
    svc = _front(service_module)
    svc._info["window"] = 4
    response = asyncio.run(svc.attention(text="one two three four five"))
    assert response.status_code == 400 and "at most 4 tokens" in json.loads(response.body)["error"]


def test_each_call_is_one_document_and_merged_calls_stay_apart(service_module, tmp_path):
    """For a model trained with document context, the sentences of one call are tagged together;
    calls that share a batcher pass never see each other's sentences."""
    import itertools

    from serve.batching import GreedyBatcher
    from serve.memory import HeapTrimmer
    from tagger.inference.predictor import Predictor
    from tests.inference.test_export import TINY_SA, _tagger

    tagger, vocab = _tagger(tmp_path, ["data=conll2003", "head=crf", "data.doc_window=16", *TINY_SA], task="ner")
    predictor = Predictor(tagger, vocab)
    model = service_module.TaggingService.inner.__new__(service_module.TaggingService.inner)
    model.predictor, model._calls, model.trimmer = predictor, itertools.count(), HeapTrimmer(0)
    passes = []
    model.batcher = GreedyBatcher(model._tag_sentences, on_pass=passes.append)
    a, b = [["the", "cat"], ["a", "dog", "sees"]], [["Zebra", "the"], ["cat"]]

    async def both():
        return await asyncio.gather(model.predict(a), model.predict(b))

    got_a, got_b = asyncio.run(both())
    assert passes == [4]  # one model pass for both calls

    def scores(preds):
        return [[round(t.score, 5) for t in s] for s in preds]

    def rounded(pairs):
        return [[round(s, 5) for _, s in sent] for sent in pairs]

    assert rounded(got_a) == scores(predictor.predict(a, docs=[0, 0]))
    assert rounded(got_b) == scores(predictor.predict(b, docs=[0, 0]))
    # the check can fail: tagged as one document, b's scores do change
    assert rounded(got_b) != scores(predictor.predict(a + b, docs=[0] * 4)[2:])


def test_a_multitask_front_answers_every_task_per_token_and_the_entity_tasks_spans(service_module):
    svc = _front(service_module, task="multitask", tag_scheme=None,
                 tasks={"pos": {"task": "pos", "labels": ["PROPN", "VERB"]},
                        "ner": {"task": "ner", "tag_scheme": "IOB2", "labels": ["O", "B-PER", "I-PER"]}})
    svc._info["tokenizer"] = "conll"
    words = ["Mary", "Smith", "sings"]

    async def predict(sentences):
        assert sentences == [words]
        return [{"pos": [("PROPN", 0.9), ("PROPN", 0.8), ("VERB", 0.7)],
                 "ner": [("B-PER", 0.6), ("I-PER", 0.5), ("O", 1.0)]}]

    svc.predict = predict
    tagged = asyncio.run(svc.tag(sentences=[words]))
    tokens = json.loads(tagged.model_dump_json())["results"][0]["tokens"]
    assert [t["tag"] for t in tokens] == ["PROPN", "PROPN", "VERB"]  # the first task's
    assert [(t["tasks"]["pos"]["tag"], t["tasks"]["ner"]["tag"]) for t in tokens] == \
        [("PROPN", "B-PER"), ("PROPN", "I-PER"), ("VERB", "O")]
    entities = asyncio.run(svc.entities(sentences=[words])).results[0].entities
    assert [(e.text, e.label, e.token_start, e.token_end) for e in entities] == [("Mary Smith", "PER", 0, 2)]


def test_single_task_tokens_have_no_tasks_key(service_module):
    svc = _front(service_module, task="pos")

    async def predict(sentences):
        return [[("DET", 0.9), ("NOUN", 0.8)]]

    svc.predict = predict
    tokens = json.loads(asyncio.run(svc.tag(sentences=[["the", "cat"]])).model_dump_json())["results"][0]["tokens"]
    assert all("tasks" not in t for t in tokens) and [t["tag"] for t in tokens] == ["DET", "NOUN"]
