"""Every use the service makes of BentoML's private code, in one module.

The service is declared with BentoML's public API (``@bentoml.service``, ``@bentoml.api``, ``@bentoml.asgi_app``,
``add_asgi_middleware``, ``get_current_service``, ``bentoml.models.get``). What it needs beyond that is here, each
piece with the reason, and each held by a canary in ``tests/serve/test_bentoml_internals.py`` that fails when a
BentoML release changes it:

1. ``Service.name``, ``Service.apis`` and, of each ``APIMethod`` (``_bentoml_sdk.method``), ``func`` (the method
   as written), ``input_spec`` (its pydantic input model), ``route``, ``ctx_param``, ``batchable`` and
   ``is_stream``: :class:`DirectAPIs` answers an API's route with them, and refuses an API whose dispatch it does
   not copy.
2. What BentoML's dispatch (``ServiceAppFactory.api_endpoint_wrapper`` and ``api_endpoint`` in
   ``_bentoml_impl.server.app``) answers, which :class:`DirectAPIs` copies: an empty body read as ``{}``, the 400
   body of a validation error, the 500 body of any other exception, an output model sent as its JSON, the header
   ``Server: BentoML Service/<name>``.
3. ``TimeoutMiddleware`` (``bentoml._internal.server.http.traffic``): :func:`fix_bentoml_timeout` replaces its
   ``__call__`` with a copy of BentoML 1.4.40's that cancels its timer, using its ``app``, ``timeout`` and
   ``_set_timer_out``.
4. ``Service.openapi_spec.asdict()``: BentoML's OpenAPI document, which :mod:`serve.openapi` corrects.

The code copied in 2 and 3 is recorded by the SHA-256 of its source (:data:`COPIED`). Where the installed BentoML's
source differs, the copy is not used (a warning says so): requests go through BentoML's dispatch, and its timeout
middleware stays as it is. The canaries fail on such a BentoML, saying what to compare.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import logging
from typing import Any, Callable

from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from serve.middleware import Message, Receive, Scope, Send, read_body

logger = logging.getLogger(__name__)
SERVER_ERROR = "An unexpected error has occurred, please check the server log."  # BentoML's 500 body
# "module:qualified name" of the BentoML code copied here -> SHA-256 of its source in BentoML 1.4.40
COPIED = {
    "_bentoml_impl.server.app:ServiceAppFactory.api_endpoint_wrapper":
        "18842e99e6086c0fafcf845358ec610d74eb17fdde1e9fefc65c87c4009f36ce",
    "_bentoml_impl.server.app:ServiceAppFactory.api_endpoint":
        "e7721288fa866de6ef5072f159bf1b76e5876a9aaf4b4c135df7c5bbd5fcf8f8",
    "bentoml._internal.server.http.traffic:TimeoutMiddleware":
        "4dab3e6bdd06efc590294d89beed9a399be6959b62bce9da024b33292e1be34b",
}


def locate(name: str) -> Any:
    """The object ``module:qualified.name``."""
    module, _, qualname = name.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def source_hash(name: str) -> str | None:
    """SHA-256 of the installed source of ``module:qualified.name``; None where it cannot be read."""
    try:
        return hashlib.sha256(inspect.getsource(locate(name)).encode()).hexdigest()
    except (AttributeError, ImportError, OSError, TypeError):
        return None


def unchanged(*names: str) -> bool:
    """Whether the installed source of each of ``names`` is the one copied; warns where it is not."""
    changed = [name for name in names if source_hash(name) != COPIED[name]]
    if changed:
        logger.warning("BentoML's %s differs from the code serve/bentoml_internals.py copies; its copy is not used",
                       ", ".join(changed))
    return not changed


# -- 1, 2: POST /tag and /entities answered without BentoML's per-request dispatch -----------------------------------
DISPATCH = ("_bentoml_impl.server.app:ServiceAppFactory.api_endpoint_wrapper",
            "_bentoml_impl.server.app:ServiceAppFactory.api_endpoint")


class DirectAPIs:
    """ASGI middleware: ``DirectAPIs(app, service=TaggingService, apis=("tag", "entities"))`` answers POST to those
    APIs' routes itself, with the service instance BentoML created (``instance()``, default
    ``bentoml.get_current_service()``); every other request goes on to BentoML.

    BentoML takes an API call through Starlette's router, its endpoint wrapper, a serde, a context middleware and a
    signature bind of the method's arguments, and the answer back through them, each layer taking event-loop time
    that every request waits for (requests/s either way, from ``python -m tests.serve.bench_dispatch``:
    docs/reference.md, "The service"). Here the body is validated by the API's input model
    (``model_validate_json``), the method is called with the model's fields as keyword arguments, and its answer
    sent as BentoML sends it: a ``Response`` as it is, an output model as ``model_dump_json()``; a validation error
    is BentoML's 400, any other exception is logged with its traceback and answered with BentoML's 500. The OpenAPI
    document still comes from the ``@bentoml.api`` declarations, and the middlewares BentoML puts before a service's
    own (metrics, tracing, access log, request timeout) still see every request."""

    def __init__(self, app: Callable, service: Any, apis: tuple[str, ...], instance: Callable[[], Any] | None = None):
        import bentoml

        self.app, self.instance = app, instance or bentoml.get_current_service
        self.routes: dict[str, tuple[Callable, type, str]] = {}  # path -> (function, input model, server header)
        for name in apis:
            api = service.apis[name]
            if api.ctx_param is not None or api.batchable or api.is_stream:
                raise ValueError(f"API {name!r} takes a context, is batchable or streams: BentoML must dispatch it")
            self.routes[api.route] = (api.func, api.input_spec, f"BentoML Service/{service.name}")
        if not unchanged(*DISPATCH):
            self.routes.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if route is None:
            return await self.app(scope, receive, send)
        func, model, server = route
        body = await read_body(receive)  # BodyLimit, before this middleware, has held it to the limit
        if body is None:  # the client went away before it had sent its request
            return
        response = await self._answer(func, model, body)
        response.headers["server"] = server
        await response(scope, receive, send)

    async def _answer(self, func: Callable, model: type, body: bytes) -> Response:
        try:
            request = model.model_validate_json(body or b"{}")
        except ValidationError as exc:
            return JSONResponse({"error": f"{exc.error_count()} validation error for {exc.title}",
                                 "detail": exc.errors(include_context=False, include_input=False)}, status_code=400)
        try:
            output = await func(self.instance(), **{k: getattr(request, k) for k in model.model_fields})
            if isinstance(output, Response):
                return output
            return Response(output.model_dump_json(), media_type="application/json")
        except Exception:
            logger.exception("exception while answering %s", model.__name__)
            return JSONResponse({"error": SERVER_ERROR}, status_code=500)


# -- 3: BentoML's request timeout without a timer left behind per request -------------------------------------------
TIMEOUT_MIDDLEWARE = "bentoml._internal.server.http.traffic:TimeoutMiddleware"


async def _timeout_call(self, scope: Scope, receive: Receive, send: Send) -> None:
    """BentoML's ``TimeoutMiddleware.__call__`` (1.4.40) with its timer cancelled once the response
    starts: same 504 after ``self.timeout`` seconds without a response, but nothing left scheduled."""
    if scope["type"] not in ("http", "websocket"):
        return await self.app(scope, receive, send)
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    timer = loop.call_later(self.timeout, self._set_timer_out, waiter)

    async def _send(message: Message) -> None:
        if not waiter.done():
            waiter.set_result(None)
            timer.cancel()
        await send(message)

    fut = asyncio.ensure_future(self.app(scope, receive, _send), loop=loop)
    try:
        await waiter
    except asyncio.TimeoutError:
        if fut.cancel():
            resp = JSONResponse({"error": f"Not able to process the request in {self.timeout} seconds"},
                                status_code=504)
            await resp(scope, receive, send)
    else:
        await fut
    finally:
        timer.cancel()


def fix_bentoml_timeout() -> None:
    """Cancel BentoML's per-request timeout timer when the request no longer needs it.

    BentoML's ``TimeoutMiddleware`` schedules ``loop.call_later(timeout, ...)`` for every request and
    never cancels it. asyncio keeps each timer, with a copy of the request's context (its tracing span
    and the objects that references), until it fires: ``timeout`` seconds (300 for the tagging
    service) of requests stay in memory, so under steady load the memory grows for
    that long (how much per request: docs/reference.md, "Memory under load"). Idempotent; applied
    when :mod:`serve.service` is imported, which every worker does; not applied (with a warning)
    where the middleware is not the one copied.
    """
    middleware = locate(TIMEOUT_MIDDLEWARE)
    if middleware.__call__ is not _timeout_call and unchanged(TIMEOUT_MIDDLEWARE):
        middleware.__call__ = _timeout_call


# -- 4 ---------------------------------------------------------------------------------------------------------------
def openapi_document(service: Any) -> dict[str, Any]:
    """BentoML's OpenAPI document of ``service``, as a dict."""
    return service.openapi_spec.asdict()
