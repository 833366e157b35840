"""`memsdk serve`: one process owns the store and the policies; apps reach it over HTTP.

The API mirrors the client (`MemoryClient`), under ``/v1/``:

    POST   /v1/ingest                      {"scope", "turn"} or {"scope", "turns": [...]}
    POST   /v1/ingest/accepted             the same, 202 with a ticket per turn once they are on disk (`routes_accepted`)
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
    GET    /healthz, /readyz, /openapi.json    up; warmed up and the store answers (`ready`)
    *      /mcp                            the MCP server (streamable HTTP; `memsdk.server.mcp`)

Every request but the health checks carries ``Authorization: Bearer <key>`` (`keys`); its
tenant is bound into every scope (`tenancy`, `inputs`). An unknown, revoked or missing key is
401; a memory or answer of another tenant is 404, the reply for one that does not exist.
Errors are ``application/problem+json`` (RFC 9457) naming the typed error and the field
(`problems`). Bodies are capped in size and pace (`ServerLimits`, `middleware`); CORS is off
unless origins are given. This module holds the routes that mirror the client; a group of
routes with a job of its own (accepted ingests, health) is an `APIRouter` module of its own.

The routes are plain functions: FastAPI runs them on its worker threads, and the client is
thread-safe (a lock per scope stripe), so a slow answer does not hold up an ingest.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any, Literal

import anyio
from fastapi import Body, FastAPI, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field
from starlette.routing import Route

from memsdk.client import MemoryClient
from memsdk.errors import InvalidInput, MemoryNotFound
from memsdk.server.accepted import AcceptedIngests
from memsdk.server.inputs import Admin, IngestIn, JSONBody, QueryScope, ScopeIn, ServerLimits, Who, in_tenant, scoped
from memsdk.server.keys import Keyring, Tenant
from memsdk.server.middleware import BodyLimit, Keyed, Traced
from memsdk.server.problems import PROBLEM, install
from memsdk.server.ready import Readiness, health_routes
from memsdk.server.routes_accepted import accepted_routes
from memsdk.server.tenancy import bound_line, public, public_line
from memsdk.telemetry import Telemetry
from memsdk.types import API_ACTOR, Scope

__all__ = ["create_app", "ServerLimits", "PROBLEM"]  # the last two for imports from before they moved

log = logging.getLogger("memsdk.server")

NDJSON = "application/x-ndjson"


# -- request bodies ---------------------------------------------------------------------------


class QuestionIn(JSONBody):
    question: str
    scope: ScopeIn | None = None
    scopes: list[ScopeIn] | None = Field(None, description="Several scopes (both speakers of a conversation) instead of one.")


class SearchIn(JSONBody):
    query: str
    scope: ScopeIn
    limit: int = Field(10, ge=1, le=1000)
    tier: Literal["episodic", "semantic", "core"] | None = None
    hybrid: bool = False


class AddIn(JSONBody):
    text: str
    scope: ScopeIn
    metadata: dict[str, Any] | None = None
    tier: Literal["episodic", "semantic", "core"] = "semantic"


class UpdateIn(JSONBody):
    text: str
    scope: ScopeIn


class ScopeOnly(JSONBody):
    scope: ScopeIn


class ForgetIn(JSONBody):
    description: str = Field(min_length=1, max_length=2000, description="What to forget, in the user's words (\"my phone number\").")
    scope: ScopeIn
    dry_run: bool = Field(False, description="Return what would be forgotten and change nothing.")


class ReadIn(JSONBody):
    source: str | list[dict[str, Any]] = Field(description="A long text, or a conversation as turns.")
    scope: ScopeIn
    budget_tokens: int = Field(256, ge=1)
    chunk_tokens: int = Field(1024, ge=1)


class GateIn(JSONBody):
    version: str
    against: str | None = Field(None, description="evaluate: the incumbent (default: the version serving).")
    on: Literal["locomo-val", "log"] = "locomo-val"
    force: bool = Field(False, description="promote: skip the gate (recorded in the audit trail).")


class ApplyIn(JSONBody):
    scope: ScopeIn
    ops: list[dict[str, Any]] = Field(max_length=1000, description="The bank's ops (memsdk.types.Op as JSON).")


class FeedbackIn(JSONBody):
    trajectory_id: uuid.UUID
    correct: bool | None = None
    gold: str | None = None


class VersionIn(JSONBody):
    version: str


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
    readiness = Readiness(client)
    readiness.start()  # beside the queue's worker, which drains what a dead server left from now on
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

        app.router.routes.append(Route(MCP_PATH, endpoint=Keyed(http_asgi(tools), keys)))
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, limits=limits)
    app.add_middleware(Traced, telemetry=telemetry)  # outermost: a refused body is a request too
    app.state.keys = keys
    app.state.readiness = readiness
    install(app)
    app.include_router(health_routes(readiness))
    app.include_router(accepted_routes(queue, limits))

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
        return [public(who.name, {"scope": s.model_dump(mode="json")})["scope"] for s in client.bank.scopes() if in_tenant(who.name, s.key)]

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
        if not owned or not all(in_tenant(who.name, key) for key in owned):
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
