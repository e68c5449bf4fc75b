"""A model of two tasks packaged and served by a real `bentoml serve`: /tag answers both tags per token, /entities
the entity task's spans, /model lists the tasks; the answers are those of tagger.load."""
from __future__ import annotations

import pytest

import tagger
from tests.serve.conftest import package_into, start, stop, wait_ready

SENTENCES = [["John", "sees", "the", "cat", "in", "New", "York", "."], ["Mary", "likes", "Rome"]]


@pytest.fixture(scope="module")
def multitask_server(tmp_path_factory, tiny_multitask_run):
    home = tmp_path_factory.mktemp("bentoml_multitask")
    tag = package_into(home, tiny_multitask_run, "tagger-multi")
    server = start(home, tag, "multi")
    try:
        wait_ready(server)
        yield server
    finally:
        stop(server)


def test_tag_returns_every_tasks_tag_per_token(multitask_server, tiny_multitask_run):
    answer = multitask_server.post("/tag", json={"sentences": SENTENCES})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["task"] == "multitask"
    offline = tagger.load(tiny_multitask_run).tag(SENTENCES)
    for result, sentence in zip(body["results"], offline):
        tokens = result["tokens"]
        assert [t["tasks"]["pos"]["tag"] for t in tokens] == sentence.tasks["pos"].tags
        assert [t["tasks"]["ner"]["tag"] for t in tokens] == sentence.tasks["ner"].tags
        assert [t["tag"] for t in tokens] == sentence.tags  # the first task's
    texts = multitask_server.post("/tag", json={"texts": ["John sees the cat in Paris."]})
    assert texts.status_code == 200, texts.text
    assert all({"pos", "ner"} == set(t["tasks"]) for t in texts.json()["results"][0]["tokens"])


def test_entities_returns_the_entity_tasks_spans(multitask_server, tiny_multitask_run):
    answer = multitask_server.post("/entities", json={"sentences": SENTENCES})
    assert answer.status_code == 200, answer.text
    offline = tagger.load(tiny_multitask_run).tag(SENTENCES)
    for result, sentence in zip(answer.json()["results"], offline):
        assert [(e["label"], e["token_start"], e["token_end"]) for e in result["entities"]] == \
            [(s.label, s.token_start, s.token_end) for s in sentence.tasks["ner"].spans]


def test_model_lists_the_tasks_with_labels_and_metrics(multitask_server, tiny_multitask_run):
    card = multitask_server.get("/model").json()
    nlp = tagger.load(tiny_multitask_run)
    assert card["task"] == "multitask" and list(card["tasks"]) == ["pos", "ner"]
    for name, task in card["tasks"].items():
        assert task["labels"] == nlp.task_labels(name) and task["task"] == name
        assert task["metrics"]["main"] in task["metrics"]["dev"]
    assert card["tasks"]["ner"]["tag_scheme"] == "IOB2"
    contract = multitask_server.get("/docs.json").json()["components"]["schemas"]
    assert "tasks" in contract["TokenOut"]["properties"] and "tasks" not in contract["TokenOut"].get("required", [])
    assert "tasks" in contract["ModelCard"]["properties"]


def test_ui_shows_every_tasks_tag_and_the_entities(multitask_server, tiny_multitask_run, tmp_path):
    import re
    import urllib.parse

    from tests.serve.test_ui import CHROMIUM, TEXT, chromium

    if CHROMIUM is None:
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    url = f"{multitask_server.url}/ui?" + urllib.parse.urlencode({"text": TEXT, "autorun": "1"})
    dom = chromium(tmp_path, url, "--dump-dom").stdout
    shown = dom[dom.index('<div id="tokens">'):dom.index('<div id="attn"')]
    tokens = re.findall(r'<span class="w">([^<]*)</span><span class="t">([^<]*)</span>', shown)
    (offline,) = tagger.load(tiny_multitask_run)(TEXT)
    assert [w for w, _ in tokens] == offline.tokens, dom[dom.index('<div id="error">'):][:500]
    assert [t for _, t in tokens] == [f"{p} · {n}" for p, n in zip(offline.tasks["pos"].tags,
                                                                      offline.tasks["ner"].tags)]
    entities = dom[dom.index('<div id="entities">'):dom.index('<div id="tokens">')]
    marked = re.findall(r"<mark[^>]*>([^<]*)<sub>(\w+)</sub>", entities)
    assert [(text, label) for text, label in marked] == [(s.text, s.label) for s in offline.tasks["ner"].spans]
