"""The ASGI layers around the app: the body limit (size and pace), a span per request, and
the key check in front of a mounted app (the MCP server)."""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memsdk.server.inputs import BEARER, ServerLimits
from memsdk.server.keys import KEY_REQUIRED, Keyring
from memsdk.server.problems import problem
from memsdk.telemetry import Telemetry

__all__ = ["BodyLimit", "Traced", "Keyed"]

class BodyLimit:
    """A body longer than its path's limit is refused with 413, from its Content-Length when
    it gives one, else as soon as the streamed bytes pass the limit; a body that stops
    arriving for ``body_idle_s`` is answered 408 and its connection closed, so a client that
    promises bytes it never sends holds neither a worker nor a connection (uvicorn times out
    only idle keep-alive connections, not a request that stalls). The body is read here (at
    most the limit) and handed on whole, so the refusal comes before any route or parser
    sees a byte of it."""

    def __init__(self, app: ASGIApp, limits: ServerLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_import_bytes if scope["path"].rstrip("/") == "/v1/import" else self.limits.max_body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, 413, "PayloadTooLarge", f"the request body is over {limit} bytes")
            return
        body, more = bytearray(), True
        while more:
            with anyio.move_on_after(self.limits.body_idle_s) as waited:
                message = await receive()
            if waited.cancelled_caught:
                await self._refuse(scope, receive, send, 408, "RequestTimeout", f"no byte of the request body arrived for {self.limits.body_idle_s:g} s", close=True)
                return
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > limit:
                await self._refuse(scope, receive, send, 413, "PayloadTooLarge", f"the request body is over {limit} bytes")
                return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, title: str, detail: str, *, close: bool = False) -> None:
        # "Connection: close": the rest of a stalled body would otherwise be read as the next request
        reply = problem(status, title, detail, field="body", headers={"Connection": "close"} if close else None)
        await reply(scope, receive, send)


class Traced:
    """A span per HTTP request, around the client's spans of its call."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app, self.telemetry = app, telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.telemetry.span(f"HTTP {scope['method']}", {"http.request.method": scope["method"], "url.path": scope["path"]}) as span:

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start" and span is not None:
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await self.app(scope, receive, sending)


class Keyed:
    """An ASGI app behind the API key check: 401 before it sees a request without a valid key.
    A class, not a function: Starlette's `Route` calls a function with a `Request`."""

    def __init__(self, app: ASGIApp, keys: Keyring) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.keys.tenant_of(dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")) is None:
            reply = problem(401, "Unauthorized", KEY_REQUIRED, headers=BEARER)
            await reply(scope, receive, send)
            return
        await self.app(scope, receive, send)
