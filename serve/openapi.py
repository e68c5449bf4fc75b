"""The service's OpenAPI document (``GET /docs.json``), saying what the service really accepts and answers.

BentoML generates a document from the endpoints' pydantic models, but it loses what the validators enforce
(exactly one of ``sentences``/``texts``; tokens without whitespace; texts with a token), documents error bodies
that the service never sends (``detail`` as a string, 404, 500) and leaves out the pages mounted beside the API
(``/model``, ``/ui``). :func:`contract` starts from BentoML's document and puts in:

* request bodies from :mod:`serve.schemas`, with every limit (``maxItems``, ``maxLength``), the whitespace
  rules as patterns, and ``oneOf`` for inputs that exclude each other;
* the error answers as sent: 400 (validation; ``detail`` is a list of ``{loc, msg}``), 413 (body too large),
  415 (not JSON), 404 (``/entities`` of a POS model, ``/attention`` of a model without attention);
* ``GET /model`` (:class:`serve.schemas.ModelCard`) and ``GET /ui`` (HTML).

:class:`ServeContract` answers ``GET /docs.json`` with it. ``make fuzz`` (schemathesis, every check) holds the
running service to this document.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

from serve.schemas import LIMITS, AttentionRequest, ErrorResponse, ModelCard, TagRequest

OPENAPI_VERSION = "3.0.3"
REF = "#/components/schemas/{model}"
API_REQUESTS = {"/tag": TagRequest, "/entities": TagRequest, "/attention": AttentionRequest}


def openapi30(schema: Any) -> Any:
    """pydantic's JSON Schema as an OpenAPI 3.0 schema object: ``anyOf [X, null]`` -> X with ``nullable``,
    ``examples`` -> ``example`` (its first), ``$defs`` references pointed at ``components/schemas``."""
    if isinstance(schema, list):
        return [openapi30(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi30(v) for k, v in schema.items() if k not in ("$defs", "examples")}
    if "examples" in schema and schema["examples"]:
        out["example"] = schema["examples"][0]
    if "$ref" in out:
        out["$ref"] = REF.format(model=out["$ref"].rsplit("/", 1)[-1])
    options = out.get("anyOf")
    if options and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            out.update(rest[0])
        else:
            out["anyOf"] = rest
        out["nullable"] = True
    return out


def _schema(model: type) -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema of ``model``, the components it refers to), both OpenAPI 3.0."""
    schema = model.model_json_schema(ref_template=REF)
    defs = {name: openapi30(d) for name, d in schema.get("$defs", {}).items()}
    return openapi30(schema), defs


def _request(model: type) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request body schema: inputs are non-null when given (a null is refused), and ``oneOf`` the alternatives."""
    schema, defs = _schema(model)
    for prop in schema["properties"].values():
        prop.pop("nullable", None)
        prop.pop("default", None)
    schema["oneOf"] = [{"required": [name]} for name in model.exclusive_inputs]
    return schema, defs


def _json(ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": REF.format(model=ref)}}}}


ERRORS = {
    "400": _json("ErrorResponse", "Invalid request: the body is not a JSON object of this schema, breaks a rule the "
                 "schema states (whitespace, limits), or a text has too many tokens once tokenised; "
                 "`detail[].loc` names the field"),
    "413": _json("ErrorResponse", f"Request body larger than {LIMITS.body_bytes} bytes (TAGGER_MAX_BODY_BYTES)"),
    "415": _json("ErrorResponse", "Content-Type other than application/json"),
}


NOT_HERE = {"/entities": _json("ErrorResponse", "The loaded model is not an entity tagger (`task` on /model)"),
            "/attention": _json("ErrorResponse", "The loaded model has no attention weights "
                                "(`supports_attention` on /model)")}


def contract(spec: dict[str, Any]) -> dict[str, Any]:
    """BentoML's OpenAPI document (``spec``, from :func:`serve.bentoml_internals.openapi_document`) made truthful;
    see the module."""
    spec = copy.deepcopy(spec)
    spec["openapi"] = OPENAPI_VERSION
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name in ("InvalidArgument", "NotFound", "InternalServerError", "TaskStatusResponse"):
        schemas.pop(name, None)
    schemas = {name: openapi30(s) for name, s in schemas.items()}
    for model in (ErrorResponse, ModelCard):
        schema, defs = _schema(model)
        schemas.update(defs)
        schemas[model.__name__] = schema
    for path, model in API_REQUESTS.items():
        op = spec["paths"][path]["post"]
        schema, defs = _request(model)
        schemas.update(defs)
        schemas[model.__name__] = schema
        op["requestBody"] = {"required": True,
                             "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}}
        ok = op["responses"].get(200) or op["responses"]["200"]
        op["responses"] = {"200": openapi30(ok), **ERRORS, **({"404": NOT_HERE[path]} if path in NOT_HERE else {})}
    spec["paths"]["/model"] = {"get": {
        "tags": ["Service APIs"], "operationId": "tagger__model",
        "description": "What is loaded: the model, its labels and scores, the backend, the limits, provenance",
        "responses": {"200": _json("ModelCard", "The model card")}}}
    spec["paths"]["/ui"] = {"get": {
        "tags": ["Service APIs"], "operationId": "tagger__ui", "description": "A page that tags text in the browser",
        "responses": {"200": {"description": "HTML page", "content": {"text/html": {"schema": {"type": "string"}}}}}}}
    spec["components"]["schemas"] = schemas
    return spec


class ServeContract:
    """ASGI middleware: ``GET /docs.json`` answers ``contract(service's document)``, computed once."""

    def __init__(self, app: Callable, spec: Callable[[], dict[str, Any]]):
        self.app, self.spec, self._body = app, spec, None

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope.get("path") != "/docs.json" or scope.get("method") not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        if self._body is None:
            self._body = json.dumps(contract(self.spec())).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(self._body)).encode())]})
        await send({"type": "http.response.body", "body": self._body if scope["method"] == "GET" else b""})
