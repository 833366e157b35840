"""Every error the server answers, as an RFC 9457 problem (``application/problem+json``).

``type`` and ``title`` name the typed error (`memsdk.errors`), ``field`` what was wrong, and
extension members carry what the remote client needs to raise the very error the embedded
one would (an error's ``reason``, a gate's ``decision``). `install` registers the handlers
on an app: memsdk's errors by `STATUS`, FastAPI's validation errors as 422 naming the field,
routing errors, and a bug as a 500 that shows nothing of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memsdk.errors import BackendError, ClientClosed, Conflict, EmbedderError, InvalidInput, MemoryNotFound, MemsdkError, PolicyError, PolicyUnavailable, StoreError
from memsdk.gate import GateFailed
from memsdk.outbox import QueueFull

__all__ = ["PROBLEM", "STATUS", "HTTPProblem", "problem", "error_reply", "install"]

log = logging.getLogger("memsdk.server")

PROBLEM = "application/problem+json"

#: typed errors -> HTTP status, most specific first
STATUS: tuple[tuple[type[MemsdkError], int], ...] = (
    (InvalidInput, 422),
    (MemoryNotFound, 404),
    (GateFailed, 409),
    (Conflict, 409),
    (ClientClosed, 503),
    (StoreError, 503),
    (EmbedderError, 503),
    (PolicyUnavailable, 503),
    (QueueFull, 503),
    (BackendError, 502),
    (PolicyError, 409),  # a switch the serving policy cannot make (a heuristic has no versions)
)


class HTTPProblem(Exception):
    """A reply that is not one of the client's errors (401, 403, 413)."""

    def __init__(self, status: int, title: str, detail: str, *, field: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.field, self.headers = status, title, detail, field, headers


def problem(status: int, title: str, detail: str, *, field: str | None = None, headers: Mapping[str, str] | None = None, **members: Any) -> JSONResponse:
    """An RFC 9457 problem: ``type`` and ``title`` name the error, ``field`` what was wrong;
    ``members`` are extension members (an error's ``reason``, a gate's ``decision``) from
    which the remote client raises the very error the embedded one would."""
    body: dict[str, Any] = {"type": f"urn:memsdk:error:{title}", "title": title, "status": status, "detail": detail}
    if field is not None:
        body["field"] = field
    body |= {k: v for k, v in members.items() if v is not None}
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def error_reply(exc: MemsdkError) -> JSONResponse:
    """One of memsdk's errors as its problem (status by `STATUS`, 500 for any other)."""
    status = next((code for cls, code in STATUS if isinstance(exc, cls)), 500)
    if isinstance(exc, MemoryNotFound):  # the same words for another tenant's id as for none, whichever call
        which = exc.field if exc.field in ("trajectory_id", "ticket") else "memory_id"
        return problem(404, "MemoryNotFound", f"no such {which.removesuffix('_id')} in this scope", field=which)
    field, reason = getattr(exc, "field", None), getattr(exc, "reason", None)
    decision = exc.decision.model_dump(mode="json") if isinstance(exc, GateFailed) else None
    return problem(
        status, type(exc).__name__, str(exc), field=field if isinstance(field, str) else None,
        reason=reason if isinstance(reason, str) else None, decision=decision, status_code=getattr(exc, "status_code", None),
    )


def install(app: FastAPI) -> None:
    """Answer every error raised in ``app``'s routes as a problem."""

    @app.exception_handler(MemsdkError)
    async def _memsdk_error(request: Request, exc: MemsdkError) -> JSONResponse:
        return error_reply(exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug: logged, not shown
        log.exception("%s %s failed", request.method, request.url.path)
        return problem(500, "InternalError", "the server failed on this request; its log has the details")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:  # routing, and a body that does not decode
        if exc.status_code == 400:
            return problem(400, "InvalidInput", f"the body cannot be read: {exc.detail}", field="body")
        return problem(exc.status_code, {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError"), str(exc.detail), headers=dict(exc.headers or {}))

    @app.exception_handler(HTTPProblem)
    async def _problem(request: Request, exc: HTTPProblem) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, field=exc.field, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":  # its loc is a character offset, not a field
            return problem(422, "InvalidInput", f"the body is not JSON: {first.get('ctx', {}).get('error', 'malformed')}", field="body")
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        return problem(422, "InvalidInput", str(first.get("msg", "invalid request")), field=".".join(loc) or "body")
