"""The OpenAPI document the service publishes (/docs.json) says what the service accepts and answers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from serve.schemas import LIMITS, ErrorResponse
from tests.serve.conftest import REPO


@pytest.fixture(scope="module")
def document(pos_server) -> dict:
    response = pos_server.get("/docs.json")
    assert response.status_code == 200
    return response.json()


def _resolve(document: dict, schema: dict) -> dict:
    return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else schema


def test_exclusive_inputs_and_limits_are_stated(document):
    for path, inputs in (("/tag", ["sentences", "texts"]), ("/entities", ["sentences", "texts"]),
                         ("/attention", ["tokens", "text"])):
        op = document["paths"][path]["post"]
        body = _resolve(document, op["requestBody"]["content"]["application/json"]["schema"])
        assert body["oneOf"] == [{"required": [inputs[0]]}, {"required": [inputs[1]]}]
        assert body["additionalProperties"] is False
        assert {"200", "400", "413", "415"} <= set(op["responses"])
    tag = _resolve(document, document["paths"]["/tag"]["post"]["requestBody"]["content"]["application/json"]["schema"])
    sentences, texts = tag["properties"]["sentences"], tag["properties"]["texts"]
    assert sentences["maxItems"] == texts["maxItems"] == LIMITS.sentences
    assert sentences["items"]["maxItems"] == LIMITS.tokens and texts["items"]["maxLength"] == LIMITS.chars
    assert "nullable" not in sentences  # a null input is refused, so the document does not offer it


@pytest.mark.parametrize("body", [b'{"texts": ["a"], "sentences": [["a"]]}', b'{"sentences": [["a b"]]}',
                                  b'{"texts": null}', b'{"texts": ["x"], "sentences": null}', b"[]"])
def test_error_bodies_are_as_documented(pos_server, document, body):
    error = document["paths"]["/tag"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorResponse"}
    detail = document["components"]["schemas"]["ErrorResponse"]["properties"]["detail"]
    assert detail["type"] == "array"
    response = pos_server.post("/tag", body=body)
    assert response.status_code == 400, response.text
    ErrorResponse.model_validate(response.json())


def test_pages_beside_the_api_are_documented(document):
    assert "200" in document["paths"]["/model"]["get"]["responses"]
    assert "text/html" in document["paths"]["/ui"]["get"]["responses"]["200"]["content"]


def test_schemathesis_finds_nothing(pos_server, tmp_path):
    """A short run of `make fuzz`'s checks against the running service (make fuzz runs many more examples)."""
    r = subprocess.run([str(Path(sys.executable).with_name("schemathesis")), "--config-file", str(REPO / "schemathesis.toml"), "run", pos_server.url + "/docs.json",
                        "--checks", "all", "--max-examples", "15", "--seed", "1", "--no-color",
                        "--generation-database", "none", "--request-timeout", "60"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-5000:]
