"""ASGI middleware of the service.

:class:`BodyLimit` checks a request body before any endpoint parses it:

* larger than the limit -> 413, whether or not the client sent ``Content-Length``;
* not UTF-8 -> 400 (JSON must be UTF-8; catching it here keeps it from surfacing as a 500);
* a content type other than JSON on an API call -> 415.

The body is read once, then replayed to the app unchanged.
"""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON_TYPES = ("application/json", "")  # bentoml reads a body without Content-Type as JSON


class BodyTooLarge(Exception):
    """A request body longer than the limit :func:`read_body` was given."""


async def read_body(receive: Receive, max_bytes: int | None = None) -> bytes | None:
    """The request's body, or None if the client disconnected before the end of it; :class:`BodyTooLarge` as soon
    as it passes ``max_bytes`` (None: no limit)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _reject(send: Send, status: int, message: str, field: str) -> None:
    body = json.dumps({"error": message, "detail": [{"loc": [field], "msg": message}]}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    def __init__(self, app: Callable, max_bytes: int, paths: tuple[str, ...]):
        self.app, self.max_bytes, self.paths = app, max_bytes, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        declared, content_type = b"", b""  # the two headers read here, not a dict of all of them per request
        for key, value in scope.get("headers", []):
            key = key.lower()
            if key == b"content-length":
                declared = value
            elif key == b"content-type":
                content_type = value
        limit_msg = f"request body is larger than the limit of {self.max_bytes} bytes (TAGGER_MAX_BODY_BYTES)"
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await _reject(send, 413, limit_msg, "body")
        api_call = scope.get("path") in self.paths
        media_type = content_type.decode("latin-1").split(";")[0].strip().lower()
        if api_call and media_type not in JSON_TYPES:
            return await _reject(send, 415, f"Content-Type must be application/json, got {media_type!r}",
                                 "content-type")

        try:
            body = await read_body(receive, self.max_bytes)
        except BodyTooLarge:
            return await _reject(send, 413, limit_msg, "body")
        if body is None:
            return
        if api_call:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as e:
                return await _reject(send, 400, f"request body is not valid UTF-8 (byte {e.start})", "body")

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect as the app expects

        await self.app(scope, replay, send)
