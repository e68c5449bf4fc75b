"""The service through HTTP: a real ``bentoml serve`` of the tiny fixture models (see conftest.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import bentoml
import pytest

from tests.serve.conftest import REPO

TEXTS = [
    "The big cat sees a dog.",
    "John doesn't like the old car's color, does he?",
    "  Leading spaces,\ttabs\nand newlines — plus émoji 🙂 and 1,000.5 numbers!  ",
]
LONG_TEXT = " ".join(["the happy dog likes this red house ."] * 375)  # 3,000 tokens


def offline(run_dir, texts, tmp_path) -> list[dict]:
    """`tagger predict --tokenize` on the same checkpoint, as a user would run it."""
    inp = tmp_path / "texts.txt"
    inp.write_text("".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "tagger.commands.predict", str(run_dir), "--tokenize",
                          "--input", str(inp)], cwd=REPO, capture_output=True, text=True, timeout=300, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_tag_equals_offline_prediction(pos_server, tiny_pos_run, tmp_path):
    texts = [t.replace("\n", " ") for t in TEXTS] + [LONG_TEXT]
    expected = offline(tiny_pos_run, texts, tmp_path)
    with bentoml.SyncHTTPClient(pos_server.url, timeout=120) as client:
        served = client.tag(texts=texts)
        by_tokens = client.tag(sentences=[e["tokens"] for e in expected])
    assert served["model"] == pos_server.model and served["task"] == "pos"
    for exp, got, got_tok in zip(expected, served["results"], by_tokens["results"]):
        # a text is tagged sentence by sentence: its tokens sent as one sentence match only a one-sentence text
        for result in (got, got_tok) if len(exp["sentences"]) == 1 else (got,):
            assert [t["text"] for t in result["tokens"]] == exp["tokens"]
            assert [t["tag"] for t in result["tokens"]] == exp["tags"]
            assert [t["score"] for t in result["tokens"]] == pytest.approx(exp["scores"], abs=1e-5)
        assert [[t["start"], t["end"]] for t in got["tokens"]] == exp["offsets"]
        assert all(t["start"] is None for t in got_tok["tokens"])  # pre-tokenised: no character offsets


def test_offsets_slice_the_original_text(pos_server):
    response = pos_server.post("/tag", json={"texts": TEXTS})
    assert response.status_code == 200, response.text
    for text, result in zip(TEXTS, response.json()["results"]):
        assert result["tokens"]
        for token in result["tokens"]:
            assert text[token["start"]:token["end"]] == token["text"]
            assert 0 < token["score"] <= 1


def test_long_text_is_tagged_whole(pos_server):
    response = pos_server.post("/tag", json={"texts": [LONG_TEXT]})
    assert response.status_code == 200, response.text
    tokens = response.json()["results"][0]["tokens"]
    assert len(tokens) == 3000 and tokens[-1]["end"] == len(LONG_TEXT)
    sentences = pos_server.post("/tag", json={"sentences": [LONG_TEXT.split()] * 2}).json()["results"]
    assert [len(s["tokens"]) for s in sentences] == [3000, 3000]


MALFORMED = [
    # (body, expected status, words the error must contain)
    (b'{"texts": ["ok"], "extra": 1}', 400, ["extra"]),
    (b'{"sentences": "The cat"}', 400, ["sentences", "array"]),
    (b'{"sentences": [["The", 3]]}', 400, ["sentences", "string"]),
    (b'{"texts": "The cat"}', 400, ["texts", "array"]),
    (b'{"texts": [null]}', 400, ["texts", "string"]),
    (b'{"texts": [""]}', 400, ["texts", "at least 1"]),
    (b'{"texts": ["   "]}', 400, ["texts[0]", "whitespace"]),
    (b'{"sentences": []}', 400, ["sentences", "at least 1"]),
    (b'{"sentences": [[]]}', 400, ["sentences", "at least 1"]),
    (b'{"sentences": [["a b"]]}', 400, ["sentences[0][0]", "whitespace"]),
    (b'{"sentences": [["a", ""]]}', 400, ["sentences", "at least 1 character"]),
    (b'{"sentences": [["a"]], "texts": ["b"]}', 400, ["exactly one"]),
    (b"{}", 400, ["exactly one", "sentences", "texts"]),
    (b"", 400, ["exactly one"]),
    (b"[1, 2]", 400, ["object"]),
    (b"null", 400, ["object"]),
    (b'{"texts": ["unterminated', 400, ["json"]),
    (b'{"texts": ["caf\xe9"]}', 400, ["utf-8"]),
    (b'\xff\xfe{\x00}\x00', 400, ["utf-8"]),
    (json.dumps({"sentences": [["a"]] * 65}).encode(), 400, ["65 sentences", "limit is 64", "TAGGER_MAX_SENTENCES"]),
    (json.dumps({"texts": ["a"] * 65}).encode(), 400, ["65 texts", "limit is 64"]),
    (json.dumps({"sentences": [["a"] * 5001]}).encode(), 400, ["5001 tokens", "limit is 5000", "TAGGER_MAX_TOKENS"]),
    (json.dumps({"texts": ["a " * 5001]}).encode(), 400, ["texts[0]", "5001 tokens", "limit is 5000"]),
    (json.dumps({"sentences": [["x" * 1001]]}).encode(), 400, ["sentences", "at most 1000 characters"]),
    (json.dumps({"texts": ["a" * 1_000_001]}).encode(), 413, ["limit of 1000000 bytes", "TAGGER_MAX_BODY_BYTES"]),
]


@pytest.mark.parametrize("body, status, words", MALFORMED, ids=[f"malformed{i}" for i in range(len(MALFORMED))])
def test_malformed_requests_get_4xx_naming_the_problem(pos_server, body, status, words):
    response = pos_server.post("/tag", body=body)
    assert response.status_code == status, response.text
    message = response.text.lower()
    for word in words:
        assert word.lower() in message, (word, response.text)


def test_protocol_abuse_gets_4xx(pos_server):
    assert pos_server.post("/tag", body=b'{"texts": ["x"]}', headers={"content-type": "text/plain"}).status_code == 415
    assert pos_server.post("/tag", body=b"a=b", headers={"content-type": "application/x-www-form-urlencoded"}).status_code == 415
    pickled = pos_server.post("/tag", body=b"\x80\x04N.", headers={"content-type": "application/vnd.bentoml+pickle"})
    assert pickled.status_code == 415
    assert pos_server.get("/tag").status_code == 405

    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(20):
            yield b" " * 100_000

    import httpx

    chunked = httpx.post(pos_server.url + "/tag", content=chunks(), headers={"content-type": "application/json"}, timeout=30)
    assert chunked.status_code == 413


def test_server_keeps_serving_after_bad_requests(pos_server):
    for body, _, _ in MALFORMED:
        pos_server.post("/tag", body=body)
    assert pos_server.get("/readyz").status_code == 200
    assert pos_server.post("/tag", json={"sentences": [["the", "cat"]]}).status_code == 200
    server_errors = [line for line in pos_server.get("/metrics").text.splitlines()
                     if line.startswith("bentoml_service_request_total") and 'http_response_code="500"' in line]
    assert server_errors and all(line.endswith(" 0.0") for line in server_errors), server_errors


def test_concurrent_requests_are_answered_correctly(pos_server):
    """The batcher may merge these into one model pass; each caller still gets its own answer."""
    requests = [{"sentences": [["the", "cat"] * (i + 1), ["a", "big", "dog", "."]]} for i in range(12)]
    sequential = [pos_server.post("/tag", json=r).json()["results"] for r in requests]
    with ThreadPoolExecutor(12) as pool:
        concurrent = list(pool.map(lambda r: pos_server.post("/tag", json=r).json()["results"], requests))
    for a, b in zip(sequential, concurrent):
        assert [[t["tag"] for t in s["tokens"]] for s in a] == [[t["tag"] for t in s["tokens"]] for s in b]
        assert [t["score"] for s in a for t in s["tokens"]] == pytest.approx(
            [t["score"] for s in b for t in s["tokens"]], abs=1e-5)
    metrics = pos_server.get("/metrics").text
    sentences = re.search(r"^tagger_batch_sentences_sum(?:\{[^}]*\})? ([0-9.e+]+)$", metrics, re.M)
    assert sentences, metrics[-2000:]
    assert float(sentences.group(1)) >= 2 * sum(len(r["sentences"]) for r in requests)


def test_entities_of_an_ner_model(ner_server):
    text = "Mary Smith finds Anna in New York ."
    response = ner_server.post("/entities", json={"texts": [text]})
    assert response.status_code == 200, response.text
    entities = response.json()["results"][0]["entities"]
    assert entities, response.text
    for e in entities:
        assert text[e["start"]:e["end"]] == e["text"]
        assert e["label"] in ("PER", "LOC") and 0 < e["score"] <= 1
    tagged = ner_server.post("/tag", json={"texts": [text]}).json()
    assert tagged["task"] == "ner"
    tags = [t["tag"] for t in tagged["results"][0]["tokens"]]
    assert set(tags) <= {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}  # the model's own scheme (IOB2)
    begins = [i for i, t in enumerate(tags) if t.startswith("B-")]
    assert [e["token_start"] for e in entities] == begins
    by_tokens = ner_server.post("/entities", json={"sentences": [text.split()]}).json()["results"][0]["entities"]
    assert [(e["text"], e["label"], e["token_start"], e["token_end"]) for e in by_tokens] == [
        (e["text"], e["label"], e["token_start"], e["token_end"]) for e in entities]
    assert all(e["start"] is None for e in by_tokens)


def test_entities_refused_for_a_pos_model(pos_server):
    response = pos_server.post("/entities", json={"texts": ["The cat."]})
    assert response.status_code == 404 and "NER model" in response.json()["error"]


def test_attention_weights(pos_server):
    response = pos_server.post("/attention", json={"text": "The big cat sees a dog."})
    assert response.status_code == 200, response.text
    body = response.json()
    n = len(body["tokens"])
    assert [t["text"] for t in body["tokens"]] == ["The", "big", "cat", "sees", "a", "dog", "."]
    assert body["layers"] == len(body["weights"]) == 2 and body["heads"] == 2
    for layer in body["weights"]:
        for head in layer:
            assert len(head) == n and all(len(row) == n and abs(sum(row) - 1) < 1e-2 for row in head)
    assert pos_server.post("/attention", json={"tokens": ["the", "cat"]}).json()["tokens"][1] == {
        "text": "cat", "start": None, "end": None}


@pytest.mark.parametrize("body, words", [
    ({"tokens": ["a"] * 201}, ["201 tokens", "limit is 200", "TAGGER_MAX_ATTENTION_TOKENS"]),
    ({"text": "a " * 201}, ["201 tokens", "at most 200"]),
    ({"tokens": []}, ["tokens", "at least 1"]),
    ({"text": "x", "tokens": ["x"]}, ["exactly one"]),
    ({"sentences": [["x"]]}, ["sentences", "extra"]),
])
def test_attention_bad_requests(pos_server, body, words):
    response = pos_server.post("/attention", json=body)
    assert response.status_code == 400, response.text
    for word in words:
        assert word.lower() in response.text.lower()


def test_model_card_names_the_source_of_a_finetuned_model(ner_server, pos_server, tiny_pos_run):
    card = ner_server.get("/model").json()
    init = card["provenance"]["init_from"]
    source = json.loads((tiny_pos_run / "metrics.json").read_text())
    assert init["source"] == str(tiny_pos_run) and init["task"] == "pos" and init["dev"] == source["dev"]["acc"]
    assert "init_from" not in pos_server.get("/model").json()["provenance"] or \
        pos_server.get("/model").json()["provenance"]["init_from"] is None


def test_model_card_and_health(pos_server, tiny_pos_run):
    card = pos_server.get("/model").json()
    metrics = json.loads((tiny_pos_run / "metrics.json").read_text())
    assert card["name"] == pos_server.model and card["task"] == "pos" and card["backend"] == "fp32"
    assert card["labels"] == sorted(card["labels"]) and "NOUN" in card["labels"]
    assert card["metrics"]["dev"]["acc"] == metrics["dev"]["acc"]
    assert card["config"]["model"]["_target_"].endswith("SelfAttentionEncoder")
    assert card["limits"] == {"sentences": 64, "tokens": 5000, "chars": 100_000, "body_bytes": 1_000_000,
                             "attention_tokens": 200}
    for path in ("/livez", "/readyz", "/metrics"):
        assert pos_server.get(path).status_code == 200
    page = pos_server.get("/ui")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"] and "/attention" in page.text


def test_texts_are_cut_as_the_models_corpus_was(pos_server, ner_server):
    """The convention saved with each model: UD splits hyphenated words, CoNLL-2003 keeps them whole; both split
    sentences, and each text is still one result."""
    text = "A state-of-the-art cat. It doesn't run."
    pos, ner = (s.post("/tag", json={"texts": [text]}).json()["results"] for s in (pos_server, ner_server))
    assert [t["text"] for t in pos[0]["tokens"]][:8] == ["A", "state", "-", "of", "-", "the", "-", "art"]
    assert [t["text"] for t in ner[0]["tokens"]][:3] == ["A", "state-of-the-art", "cat"]
    assert [t["text"] for t in ner[0]["tokens"]][-4:] == ["does", "n't", "run", "."]


def test_a_damaged_store_entry_stops_bentoml_serve_naming_it(tmp_path, tiny_pos_run):
    """The entry process checks the model's store entry (bentoml.models.get) before any worker starts."""
    from tests.serve.conftest import START_TIMEOUT, package_into, start, stop

    tag = package_into(tmp_path, tiny_pos_run, "tagger")
    (weights,) = (tmp_path / "models").rglob("weights.safetensors")
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    server = start(tmp_path, "tagger:latest", "damaged")
    try:
        code = server.proc.wait(timeout=START_TIMEOUT)
    finally:
        stop(server)
    assert code != 0
    assert f"PackageError: {tag}: weights.safetensors does not match the sha256" in server.logs(), server.logs()
