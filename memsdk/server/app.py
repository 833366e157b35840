"""`memsdk serve`: one process owns the store and the policies; apps reach it over HTTP.

The API mirrors the client (`MemoryClient`), under ``/v1/``:

    POST   /v1/ingest                      {"scope", "turn"} or {"scope", "turns": [...]}
    POST   /v1/ingest/accepted             the same, 202 with a ticket per turn once they are on disk
    GET    /v1/ingest/accepted/{ticket}    pending, done or dead
    POST   /v1/answer | /v1/retrieve       {"question", "scope"} or {"question", "scopes": [...]}
    POST   /v1/search                      {"query", "scope", "limit", "tier", "hybrid"}
    GET    /v1/memories?user_id=...        list (tier, include_deleted, limit, offset)
    POST   /v1/memories                    add {"text", "scope", "metadata", "tier"}
    GET    /v1/memories/{id}?user_id=...   get
    PATCH  /v1/memories/{id}               update {"text", "scope"}
    DELETE /v1/memories/{id}?user_id=...   delete (soft)
    POST   /v1/memories/{id}/restore       {"scope"}
    GET    /v1/history?user_id=...         the scope's history (memory_id=... for one memory)
    POST   /v1/forget                      {"description", "scope", "dry_run"}: by meaning, soft
    POST   /v1/erase                       {"scope"}: gone for good
    POST   /v1/export                      {"scope"} -> application/x-ndjson, streamed
    POST   /v1/import?user_id=...          an export's lines as the body
    POST   /v1/feedback                    {"trajectory_id", "correct", "gold"}
    GET    /v1/policies                    the versions serving (/v1/policies/stats: failure counters)
    POST   /v1/read                        {"source", "scope", "budget_tokens", "chunk_tokens"}
    GET    /v1/scopes, /v1/limits          the tenant's scopes, the bank's limits
    POST   /v1/apply                       {"scope", "ops"}: a batch of the bank's ops (the LangGraph store)
    POST   /v1/policies/{role}/use         {"version"}; admin keys only
    POST   /v1/policies/{role}/evaluate    {"version", "against", "on"}; admin keys only
    POST   /v1/policies/{role}/promote     {"version", "force", "on"}; admin keys only
    POST   /v1/policies/{role}/rollback    admin keys only
    GET    /healthz, /readyz, /openapi.json
    *      /mcp                            the MCP server (streamable HTTP; `memsdk.server.mcp`)

Every request but the health checks carries ``Authorization: Bearer <key>`` (`keys`); its
tenant is bound into every scope (`tenancy`). An unknown, revoked or missing key is 401; a
memory or answer of another tenant is 404, the reply for one that does not exist. Errors
are ``application/problem+json`` (RFC 9457) naming the typed error and the field. Bodies
are capped (`ServerLimits`); CORS is off unless origins are given.

The routes are plain functions: FastAPI runs them on its worker threads, and the client is
thread-safe (a lock per scope stripe), so a slow answer does not hold up an ingest.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from memsdk.client import MemoryClient
from memsdk.gate import GateFailed
from memsdk.errors import (
    BackendError,
    ClientClosed,
    Conflict,
    EmbedderError,
    InvalidInput,
    MemoryNotFound,
    MemsdkError,
    PolicyError,
    PolicyUnavailable,
    StoreError,
)
from memsdk.outbox import QueueFull
from memsdk.server.accepted import AcceptedIngests
from memsdk.server.keys import KEY_REQUIRED, Keyring, Tenant
from memsdk.server.tenancy import bind, bound_line, public, public_line
from memsdk.telemetry import Telemetry
from memsdk.types import API_ACTOR, Scope, Turn

__all__ = ["create_app", "ServerLimits", "PROBLEM"]

log = logging.getLogger("memsdk.server")

PROBLEM = "application/problem+json"
_PROBE = Scope(run_id=".readyz")
#: the challenge a 401 carries
_BEARER = {"WWW-Authenticate": "Bearer"}
NDJSON = "application/x-ndjson"


@dataclass(frozen=True)
class ServerLimits:
    """What one request may send: bodies over ``max_body_bytes`` (``max_import_bytes`` for
    an import, which carries a whole scope) are refused with 413 before they are read whole;
    ``max_turns`` turns per ingest, ``max_scopes`` scopes per answer."""

    max_body_bytes: int = 1 << 20
    max_import_bytes: int = 256 << 20
    max_turns: int = 1000
    max_scopes: int = 16


# -- request bodies ---------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeIn(_Body):
    """Whose memory, as the app names it; the server binds it to the key's tenant."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class IngestIn(_Body):
    scope: ScopeIn
    turn: dict[str, Any] | None = Field(None, description="One turn: speaker, text, timestamp, turn_id (the client's Turn).")
    turns: list[dict[str, Any]] | None = Field(None, description="Several turns, ingested in order.")


class QuestionIn(_Body):
    question: str
    scope: ScopeIn | None = None
    scopes: list[ScopeIn] | None = Field(None, description="Several scopes (both speakers of a conversation) instead of one.")


class SearchIn(_Body):
    query: str
    scope: ScopeIn
    limit: int = Field(10, ge=1, le=1000)
    tier: Literal["episodic", "semantic", "core"] | None = None
    hybrid: bool = False


class AddIn(_Body):
    text: str
    scope: ScopeIn
    metadata: dict[str, Any] | None = None
    tier: Literal["episodic", "semantic", "core"] = "semantic"


class UpdateIn(_Body):
    text: str
    scope: ScopeIn


class ScopeOnly(_Body):
    scope: ScopeIn


class ForgetIn(_Body):
    description: str = Field(min_length=1, max_length=2000, description="What to forget, in the user's words (\"my phone number\").")
    scope: ScopeIn
    dry_run: bool = Field(False, description="Return what would be forgotten and change nothing.")


class ReadIn(_Body):
    source: str | list[dict[str, Any]] = Field(description="A long text, or a conversation as turns.")
    scope: ScopeIn
    budget_tokens: int = Field(256, ge=1)
    chunk_tokens: int = Field(1024, ge=1)


class GateIn(_Body):
    version: str
    against: str | None = Field(None, description="evaluate: the incumbent (default: the version serving).")
    on: Literal["locomo-val", "log"] = "locomo-val"
    force: bool = Field(False, description="promote: skip the gate (recorded in the audit trail).")


class ApplyIn(_Body):
    scope: ScopeIn
    ops: list[dict[str, Any]] = Field(max_length=1000, description="The bank's ops (memsdk.types.Op as JSON).")


class FeedbackIn(_Body):
    trajectory_id: uuid.UUID
    correct: bool | None = None
    gold: str | None = None


class VersionIn(_Body):
    version: str


# -- errors -----------------------------------------------------------------------------------

#: typed errors -> HTTP status, most specific first
_STATUS: tuple[tuple[type[MemsdkError], int], ...] = (
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


class _Problem(Exception):
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


def _error_reply(exc: MemsdkError) -> JSONResponse:
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    if isinstance(exc, MemoryNotFound):  # the same words for another tenant's id as for none, whichever call
        which = exc.field if exc.field in ("trajectory_id", "ticket") else "memory_id"
        return problem(404, "MemoryNotFound", f"no such {which.removesuffix('_id')} in this scope", field=which)
    field, reason = getattr(exc, "field", None), getattr(exc, "reason", None)
    decision = exc.decision.model_dump(mode="json") if isinstance(exc, GateFailed) else None
    return problem(
        status, type(exc).__name__, str(exc), field=field if isinstance(field, str) else None,
        reason=reason if isinstance(reason, str) else None, decision=decision, status_code=getattr(exc, "status_code", None),
    )


# -- the body limit ---------------------------------------------------------------------------


class _BodyLimit:
    """ASGI middleware: a body longer than its path's limit is refused with 413, from its
    Content-Length when it gives one, else as soon as the streamed bytes pass the limit.
    The body is read here (at most the limit) and handed on whole, so the refusal comes
    before any route or parser sees a byte of it."""

    def __init__(self, app: Callable[..., Awaitable[None]], limits: ServerLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_import_bytes if scope["path"].rstrip("/") == "/v1/import" else self.limits.max_body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > limit:
                await self._refuse(scope, receive, send, limit)
                return
        handed = False

        async def replay() -> dict[str, Any]:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope: MutableMapping[str, Any], receive: Any, send: Any, limit: int) -> None:
        reply = problem(413, "PayloadTooLarge", f"the request body is over {limit} bytes", field="body")
        await reply(scope, receive, send)


class _Traced:
    """ASGI middleware: a span per HTTP request, around the client's spans of its call."""

    def __init__(self, app: Callable[..., Awaitable[None]], telemetry: Telemetry) -> None:
        self.app, self.telemetry = app, telemetry

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.telemetry.span(f"HTTP {scope['method']}", {"http.request.method": scope["method"], "url.path": scope["path"]}) as span:

            async def sending(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start" and span is not None:
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await self.app(scope, receive, sending)


# -- who is asking ----------------------------------------------------------------------------


def _tenant(request: Request) -> Tenant:
    """The tenant of the request's key (`Keyring.tenant_for`), else 401."""
    keys: Keyring = request.app.state.keys
    found = keys.tenant_of(request.headers.get("authorization"))
    if found is None:
        raise _Problem(401, "Unauthorized", KEY_REQUIRED, headers=_BEARER)
    return found


def _admin(who: Annotated[Tenant, Depends(_tenant)]) -> Tenant:
    if not who.admin:
        raise _Problem(403, "Forbidden", "switching policies needs an admin key")
    return who


def _query_scope(user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, str | None]:
    """A scope named in the query string (GET and DELETE have no body)."""
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


Who = Annotated[Tenant, Depends(_tenant)]
Admin = Annotated[Tenant, Depends(_admin)]
QueryScope = Annotated[dict[str, str | None], Depends(_query_scope)]


# -- the app ----------------------------------------------------------------------------------


def create_app(
    client: MemoryClient, keys: Keyring, *, limits: ServerLimits = ServerLimits(), cors_origins: Sequence[str] = (), telemetry: Telemetry | None = None, mcp: bool = True
) -> FastAPI:
    """The server's ASGI app over ``client`` (which it does not close: whoever made it does).
    Its accepted ingests wait in an `Outbox` under the client's data dir, drained when the
    app shuts down (uvicorn runs the lifespan) and replayed by the next app after a crash.
    ``telemetry``: where the span of each request and the queue depth go (default: the
    app's global OpenTelemetry providers, as the client's own spans). ``mcp``: the MCP
    server at ``/mcp`` (`memsdk.server.mcp`) when the ``mcp`` package is installed."""
    queue = AcceptedIngests(client)
    telemetry = telemetry if telemetry is not None else Telemetry()
    telemetry.gauge("memsdk.queue.depth", "Accepted turns on disk, not ingested yet.", lambda: queue.pending)
    tools = _mcp_tools(client, keys) if mcp else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if tools is not None:
                await stack.enter_async_context(tools.session_manager.run())
            yield
        left = await anyio.to_thread.run_sync(queue.close)
        if left:
            log.warning("%d accepted turns not ingested at shutdown; the next start ingests them", left)

    app = FastAPI(title="memsdk", version="1", summary="Agent memory with trained, hot-swappable policies", openapi_url="/openapi.json", docs_url=None, redoc_url=None, lifespan=lifespan)
    if tools is not None:
        from memsdk.server.mcp import MCP_PATH, http_asgi

        app.router.routes.append(Route(MCP_PATH, endpoint=_Keyed(http_asgi(tools), keys)))
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(_BodyLimit, limits=limits)
    app.add_middleware(_Traced, telemetry=telemetry)  # outermost: a refused body is a request too
    app.state.keys = keys

    @app.exception_handler(MemsdkError)
    async def _memsdk_error(request: Request, exc: MemsdkError) -> JSONResponse:
        return _error_reply(exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug: logged, not shown
        log.exception("%s %s failed", request.method, request.url.path)
        return problem(500, "InternalError", "the server failed on this request; its log has the details")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:  # routing, and a body that does not decode
        if exc.status_code == 400:
            return problem(400, "InvalidInput", f"the body cannot be read: {exc.detail}", field="body")
        return problem(exc.status_code, {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError"), str(exc.detail), headers=dict(exc.headers or {}))

    @app.exception_handler(_Problem)
    async def _problem(request: Request, exc: _Problem) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, field=exc.field, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":  # its loc is a character offset, not a field
            return problem(422, "InvalidInput", f"the body is not JSON: {first.get('ctx', {}).get('error', 'malformed')}", field="body")
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        return problem(422, "InvalidInput", str(first.get("msg", "invalid request")), field=".".join(loc) or "body")

    def scoped(who: Tenant, scope: ScopeIn | dict[str, Any] | None, field: str = "scope") -> Scope:
        raw = scope.model_dump() if isinstance(scope, ScopeIn) else scope
        return bind(who.name, None if raw is None else {k: v for k, v in raw.items() if v is not None}, field)

    def out(who: Tenant, value: Any) -> Any:
        """A result as JSON, its scopes as the tenant named them."""
        if isinstance(value, BaseModel):
            return public(who.name, value.model_dump(mode="json"))
        if isinstance(value, list):
            return [out(who, v) for v in value]
        if isinstance(value, dict):
            return {k: out(who, v) for k, v in value.items()}
        return public(who.name, value)

    def scopes_of(who: Tenant, body: QuestionIn) -> list[Scope]:
        if (body.scope is None) == (body.scopes is None):
            raise InvalidInput("scope", "give scope or scopes, not both")
        if body.scopes is not None:
            if not body.scopes or len(body.scopes) > limits.max_scopes:
                raise InvalidInput("scopes", f"give 1 to {limits.max_scopes} scopes")
            return [scoped(who, s, f"scopes[{i}]") for i, s in enumerate(body.scopes)]
        return [scoped(who, body.scope)]

    # -- health ------------------------------------------------------------------------------

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz() -> Response:
        """The client is open and its store answers (a read of a scope no tenant can name:
        every tenant's ids hold a "/")."""
        try:
            client.list(scope=_PROBE, limit=1)
        except MemsdkError as exc:
            return problem(503, type(exc).__name__, str(exc))
        return JSONResponse({"status": "ready"})

    # -- memory ------------------------------------------------------------------------------

    @app.post("/v1/ingest", tags=["memory"])
    def ingest(who: Who, body: IngestIn) -> Any:
        """One turn (its `IngestResult`) or several in order (a list of them)."""
        scope = scoped(who, body.scope)
        if (body.turn is None) == (body.turns is None):
            raise InvalidInput("turn", "give turn or turns, not both")
        if body.turns is not None:
            if not body.turns or len(body.turns) > limits.max_turns:
                raise InvalidInput("turns", f"give 1 to {limits.max_turns} turns")
            return out(who, client.ingest(body.turns, scope=scope, progress=False))
        return out(who, client.ingest(body.turn or {}, scope=scope))

    @app.post("/v1/ingest/accepted", tags=["memory"], status_code=202)
    def ingest_accepted(who: Who, body: IngestIn) -> dict[str, list[str]]:
        """Queue the turns on disk and reply at once: a ticket per turn (a repeated
        ``turn_id`` of the scope is not queued again); `ingest_status` follows each."""
        scope = scoped(who, body.scope)
        turns = body.turns if body.turns is not None else [body.turn] if body.turn is not None else []
        if (body.turn is None) == (body.turns is None) or not turns or len(turns) > limits.max_turns:
            raise InvalidInput("turn", f"give turn, or 1 to {limits.max_turns} turns")
        return {"tickets": queue.accept(scope, [_turn(t, f"turns[{i}]" if body.turns is not None else "turn") for i, t in enumerate(turns)])}

    @app.get("/v1/ingest/accepted/{ticket}", tags=["memory"])
    def ingest_status(who: Who, ticket: str) -> dict[str, str | None]:
        """``pending``, ``done`` or ``dead`` (with the error); 404 for another tenant's ticket."""
        found = queue.status(ticket)
        if found is None or not _in_tenant(who.name, found.scope_key):
            raise MemoryNotFound(ticket, field="ticket")
        return {"ticket": ticket, "state": found.state, "error": found.error}

    @app.post("/v1/answer", tags=["memory"])
    def answer(who: Who, body: QuestionIn) -> Any:
        """Answer from memory (`MemoryClient.answer`)."""
        return out(who, client.answer(body.question, scope=scopes_of(who, body)))

    @app.post("/v1/retrieve", tags=["memory"])
    def retrieve(who: Who, body: QuestionIn) -> Any:
        """What an answer would be shown, best first."""
        return out(who, client.retrieve(body.question, scope=scopes_of(who, body)))

    @app.post("/v1/search", tags=["memory"])
    def search(who: Who, body: SearchIn) -> Any:
        return out(who, client.search(body.query, scope=scoped(who, body.scope), limit=body.limit, tier=body.tier, hybrid=body.hybrid))

    @app.get("/v1/memories", tags=["memories"])
    def list_memories(
        who: Who, scope: QueryScope, tier: Literal["episodic", "semantic", "core"] | None = None, include_deleted: bool = False,
        limit: Annotated[int | None, Query(ge=0, le=10_000)] = None, offset: Annotated[int, Query(ge=0)] = 0,
    ) -> Any:
        return out(who, client.list(scope=scoped(who, scope), include_deleted=include_deleted, limit=limit, offset=offset, tier=tier))

    @app.post("/v1/memories", tags=["memories"], status_code=201)
    def add(who: Who, body: AddIn) -> Any:
        return out(who, client.add(body.text, scope=scoped(who, body.scope), metadata=body.metadata, tier=body.tier))

    @app.get("/v1/memories/{memory_id}", tags=["memories"])
    def get(who: Who, memory_id: str, scope: QueryScope) -> Any:
        return out(who, client.get(memory_id, scope=scoped(who, scope)))

    @app.patch("/v1/memories/{memory_id}", tags=["memories"])
    def update(who: Who, memory_id: str, body: UpdateIn) -> Any:
        return out(who, client.update(memory_id, body.text, scope=scoped(who, body.scope)))

    @app.delete("/v1/memories/{memory_id}", tags=["memories"])
    def delete(who: Who, memory_id: str, scope: QueryScope) -> Any:
        return out(who, client.delete(memory_id, scope=scoped(who, scope)))

    @app.post("/v1/memories/{memory_id}/restore", tags=["memories"])
    def restore(who: Who, memory_id: str, body: ScopeOnly) -> Any:
        return out(who, client.restore(memory_id, scope=scoped(who, body.scope)))

    @app.get("/v1/scopes", tags=["bank"])
    def scopes(who: Who) -> Any:
        """The tenant's scopes that hold a live memory (ids only), as the tenant named them."""
        return [public(who.name, {"scope": s.model_dump(mode="json")})["scope"] for s in client.bank.scopes() if _in_tenant(who.name, s.key)]

    @app.post("/v1/apply", tags=["bank"])
    def apply(who: Who, body: ApplyIn) -> Any:
        """One batch of the bank's ops on the scope, all or nothing, as the API actor (the
        LangGraph store's writes); an op naming another scope's memory is not found."""
        return out(who, client.bank.apply(scoped(who, body.scope), body.ops, actor=API_ACTOR).records)

    @app.get("/v1/limits", tags=["bank"])
    def bank_limits(who: Who) -> Any:
        """The bank's limits: text sizes, ops per batch, search depth."""
        return dataclasses.asdict(client.bank.limits)

    @app.post("/v1/read", tags=["memory"])
    def read(who: Who, body: ReadIn) -> Any:
        """A long input into the scope's core memory, chunk by chunk (MemAgent)."""
        return out(who, client.read(body.source, scope=scoped(who, body.scope), budget_tokens=body.budget_tokens, chunk_tokens=body.chunk_tokens, progress=False))

    @app.get("/v1/history", tags=["memories"])
    def history(who: Who, scope: QueryScope, memory_id: str | None = None) -> Any:
        return out(who, client.history(memory_id, scope=scoped(who, scope)))

    @app.post("/v1/forget", tags=["memories"])
    def forget(who: Who, body: ForgetIn) -> Any:
        """Forget what the description names, in every tier of the scope (soft); with
        ``dry_run`` only what would be forgotten."""
        return out(who, client.forget(body.description, scope=scoped(who, body.scope), dry_run=body.dry_run))

    @app.post("/v1/erase", tags=["memories"])
    def erase(who: Who, body: ScopeOnly) -> dict[str, int]:
        """The scope's memories, history and logged interactions, gone for good."""
        return {"erased": client.erase(scope=scoped(who, body.scope))}

    @app.post("/v1/export", tags=["memories"], response_class=StreamingResponse)
    def export(who: Who, body: ScopeOnly) -> StreamingResponse:
        """The scope as JSON lines (the client's export format), streamed."""
        buffer = io.StringIO()
        client.export(buffer, scope=scoped(who, body.scope))

        def lines() -> Iterator[str]:
            for line in buffer.getvalue().splitlines():
                yield public_line(who.name, line) + "\n"

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.post("/v1/import", tags=["memories"])
    def import_(who: Who, scope: QueryScope, body: Annotated[bytes, Body(media_type=NDJSON)] = b"") -> dict[str, int]:
        """An export's lines into the scope the query names (default: the one it came from,
        in this tenant); all or nothing."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("body", "is not UTF-8") from None
        lines = [bound_line(who.name, line, n) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        target = scoped(who, scope) if any(scope.values()) else None
        return {"imported": client.import_(io.StringIO("\n".join(lines) + "\n"), scope=target)}

    @app.post("/v1/feedback", tags=["memory"], status_code=204)
    def feedback(who: Who, body: FeedbackIn) -> Response:
        """A reward for a logged answer of this tenant's."""
        owned = client.log.scope_keys(body.trajectory_id) if client.log is not None else []
        if not owned or not all(_in_tenant(who.name, key) for key in owned):
            raise MemoryNotFound(body.trajectory_id, field="trajectory_id")
        client.feedback(body.trajectory_id, correct=body.correct, gold=body.gold)
        return Response(status_code=204)

    # -- policies ----------------------------------------------------------------------------

    @app.get("/v1/policies", tags=["policies"])
    def policies(who: Who) -> Any:
        return out(who, client.policies)

    @app.get("/v1/policies/stats", tags=["policies"])
    def policy_stats(who: Who) -> dict[str, dict[str, int]]:
        """Failure counters per role since the server started (parse failures, fallbacks, ...)."""
        return client.policy_stats

    @app.post("/v1/policies/{role}/use", tags=["policies"])
    def use_policy(who: Admin, role: str, body: VersionIn) -> Any:
        """Serve ``version`` for ``role`` now (no gate; `memsdk policies promote` gates)."""
        client.use_policy(role, body.version)
        log.info("tenant %s switched %s to %s", who.name, role, body.version)
        return out(who, client.policies)

    @app.post("/v1/policies/{role}/evaluate", tags=["policies"])
    def evaluate(who: Admin, role: str, body: GateIn) -> Any:
        """The release gate's comparison of ``version`` with the incumbent; switches nothing."""
        return out(who, client.evaluate_policy(role, body.version, against=body.against, on=body.on))

    @app.post("/v1/policies/{role}/promote", tags=["policies"])
    def promote(who: Admin, role: str, body: GateIn) -> Any:
        """Serve ``version`` if the gate passes (409 GateFailed, with the decision, if not)."""
        decision = client.promote(role, body.version, force=body.force, on=body.on)
        log.info("tenant %s promoted %s %s", who.name, role, body.version)
        return {"decision": None if decision is None else out(who, decision), "policies": out(who, client.policies)}

    @app.post("/v1/policies/{role}/rollback", tags=["policies"])
    def rollback(who: Admin, role: str) -> Any:
        client.rollback(role)
        log.info("tenant %s rolled %s back", who.name, role)
        return out(who, client.policies)

    return app


def _mcp_tools(client: MemoryClient, keys: Keyring) -> Any:
    """The MCP server of `memsdk.server.mcp`, or None without the ``mcp`` package."""
    try:
        from memsdk.server.mcp import memory_server, scope_from_key
    except ImportError:
        log.info("the mcp package is not installed: no MCP server at /mcp (pip install 'memsdk[server]')")
        return None
    return memory_server(client, scope_from_key(keys))


class _Keyed:
    """An ASGI app behind the API key check: 401 before it sees a request without a valid key.
    A class, not a function: Starlette's `Route` calls a function with a `Request`."""

    def __init__(self, app: Callable[..., Awaitable[None]], keys: Keyring) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if self.keys.tenant_of(dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")) is None:
            reply = problem(401, "Unauthorized", KEY_REQUIRED, headers=_BEARER)
            await reply(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _turn(raw: dict[str, Any], field: str) -> Turn:
    try:
        return Turn.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc, field) from None


def _in_tenant(tenant: str, scope_key: str) -> bool:
    """Whether a stored scope (its `Scope.key`) is one of ``tenant``'s: every id it names is."""
    try:
        ids = json.loads(scope_key)
    except ValueError:
        return False
    return isinstance(ids, list) and any(ids) and all(i is None or (isinstance(i, str) and i.startswith(f"{tenant}/")) for i in ids)
