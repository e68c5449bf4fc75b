"""ASGI middleware: the service's JSON APIs answered without BentoML's per-request dispatch.

BentoML takes an API call through Starlette's router, its endpoint wrapper, a serde, a context middleware and a
signature bind of the method's arguments, and the answer back through them. On the 2-core bench machine, driving the
service's ASGI app in-process with 32 concurrent single-sentence calls, that took 0.14-0.27 ms of the event loop
per request, more than the tagging of the request's sentence in a merged pass. For the APIs named here
:class:`DirectAPIs` does what that dispatch does for a JSON body:

* the body is validated by the API's input model (``model_validate_json``, an empty body read as ``{}``);
* an invalid one is a 400 whose body is BentoML's: ``{"error": "N validation error(s) for Model", "detail": [...]}``;
* the method gets the model's fields as keyword arguments; a ``Response`` it returns is sent as it is, an output
  model as ``model_dump_json()``;
* an exception is logged with its traceback and answered 500 with BentoML's message.

Every other request goes on to BentoML. The contract (OpenAPI, ``/docs.json``) still comes from the ``@bentoml.api``
declarations: the same input and output models. The middlewares BentoML puts before a service's own (metrics,
tracing, access log, request timeout) still see every request.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from serve.middleware import Receive, Scope, Send, read_body

logger = logging.getLogger(__name__)
SERVER_ERROR = "An unexpected error has occurred, please check the server log."  # BentoML's 500 body


class DirectAPIs:
    """``DirectAPIs(app, service=TaggingService, apis=("tag", "entities"))``: POST to those APIs' routes is answered
    here, by the service instance BentoML created (``instance()``: ``bentoml.get_current_service()``)."""

    def __init__(self, app: Callable, service: Any, apis: tuple[str, ...], instance: Callable[[], Any] | None = None):
        import bentoml

        self.app, self.instance = app, instance or bentoml.get_current_service
        self.routes: dict[str, tuple[Callable, type, str]] = {}  # path -> (function, input model, server header)
        for name in apis:
            api = service.apis[name]
            if api.ctx_param is not None or api.batchable or api.is_stream:
                raise ValueError(f"API {name!r} takes a context, is batchable or streams: BentoML must dispatch it")
            self.routes[api.route] = (api.func, api.input_spec, f"BentoML Service/{service.name}")

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

