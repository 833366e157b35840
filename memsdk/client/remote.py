"""The client's API over HTTP: ``MemoryClient(url=..., api_key=...)`` talks to `memsdk serve`.

qdrant-client's pattern: one client class, several transports. ``MemoryClient()`` is the
embedded store in this process; ``MemoryClient(url="http://memsdk:8080", api_key=...)``
returns a `RemoteMemoryClient`, a `MemoryClient` whose every call is one request to a
server that owns the store and the policies (``AsyncMemoryClient(url=...)``: the async
twin). Same methods, same result types, same typed errors: the server sends each error as a
problem document naming its type, field and reason (`memsdk.server.problems`), and
`memsdk.client._remote_plans` raises that type again here. A server that cannot be reached
is `StoreUnavailable`; a refused key `NotAuthorized`.

Each call is planned once, without I/O (`memsdk.client._remote_plans`: the request, and how
to read its reply), and sent here by the sync client with `httpx.Client` or by the async one
with `httpx.AsyncClient`, so the two cannot drift apart. The scope is the app's own: the
server binds it to the key's tenant.

Beyond the embedded client's calls, a remote client has the server's accepted ingests:
``ingest_accepted`` (a ticket per turn once the turns are on the server's disk, each stored
once behind the reply; sent again on a connection error, which the turn_ids make safe) and
``ingest_status``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, IO, TypeVar, overload

import builtins
import httpx

from memsdk.bank import BankLimits
from memsdk.client._base import ScopeLike, TurnLike
from memsdk.client._remote_plans import (
    ACCEPTED_RETRIES, RECORDS, Plan, Plans, accepted_plans, auth_headers, ingest_plans, retry_in, scope_json, settled, status_plan, unreachable,
)  # fmt: skip
from memsdk.client.aio import AsyncMemoryClient
from memsdk.client.results import AcceptedTurn, AnswerResult, ForgetResult, IngestResult, ReadResult, TicketStatus
from memsdk.client.sync import MemoryClient
from memsdk.docstrings import documented_as
from memsdk.config import ClientConfig
from memsdk.errors import InvalidInput
from memsdk.gate import GateConfig, GateDecision, GateStates
from memsdk.serving.policy_set import PolicyInfo
from memsdk.types import HistoryEvent, MemoryRecord, Scope, ScoredMemory, Tier, Turn

__all__ = ["RemoteMemoryClient", "AsyncRemoteMemoryClient", "RemoteBank", "DEFAULT_TIMEOUT_S"]

T = TypeVar("T")

#: seconds a request may take: an answer over a small CPU model takes seconds, a gate minutes
DEFAULT_TIMEOUT_S = 120.0


def _sent(http: httpx.Client, url: str, plan: Plan[T], *, retries: int = 0) -> T:
    """``plan`` sent on a blocking connection, its reply read or raised; sent again up to
    ``retries`` times after a connection error or a "not now" reply (`retry_in`)."""
    attempt = 0
    while True:
        r: httpx.Response | None = None
        try:
            r = http.request(**plan.request())
        except httpx.TransportError as exc:
            if (wait := retry_in(attempt, retries, None)) is None:
                raise unreachable(url, exc) from exc
        else:
            if (wait := retry_in(attempt, retries, r)) is None:
                return settled(r, plan)
        time.sleep(wait)
        attempt += 1



# -- the clients ------------------------------------------------------------------------------


class RemoteBank:
    """The part of the server's `MemoryBank` a remote client reaches (``client.bank``): the
    calls the LangGraph store makes (`memsdk_adapters.langchain.store`), in the tenant's
    scopes. Blocking, on a connection of its own, so an async client's store can run it
    in a worker thread as it runs an embedded bank."""

    def __init__(self, url: str, headers: Any, timeout: Any) -> None:
        self._http = httpx.Client(base_url=url, headers=headers, timeout=timeout)
        self.url = url

    def _send(self, plan: Plan[T]) -> T:
        return _sent(self._http, self.url, plan)

    @functools.cached_property
    def limits(self) -> BankLimits:
        return self._send(Plan("GET", "/v1/limits", lambda r: BankLimits(**r.json())))

    def list(self, scope: ScopeLike, *, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return self._send(Plans.list(scope, include_deleted, limit, offset, tier))

    def search(self, scope: ScopeLike, query: str, *, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return self._send(Plans.search(query, scope, limit, tier, hybrid))

    def scopes(self, *, limit: int = 100_000) -> builtins.list[Scope]:
        return self._send(Plan("GET", "/v1/scopes", lambda r: [Scope.model_validate(s) for s in r.json()][:limit]))

    def apply(self, scope: ScopeLike, ops: Iterable[Any], *, actor: Any = None) -> builtins.list[MemoryRecord]:
        """The batch, as the API actor (the server's choice, whatever ``actor`` says); the records it wrote."""
        body = [o.model_dump(mode="json") if hasattr(o, "model_dump") else o for o in ops]
        return self._send(Plan("POST", "/v1/apply", lambda r: RECORDS.validate_python(r.json()), json={"scope": scope_json(scope), "ops": body}))

    def close(self) -> None:
        self._http.close()


class _ServerOwned:
    """What only the process that owns the store has: a remote client says so."""

    _remote_bank: RemoteBank | None = None

    @property
    def bank(self) -> RemoteBank:
        """The server's bank, as far as a tenant reaches it (`RemoteBank`)."""
        if self._remote_bank is None:
            http: Any = getattr(self, "_http")
            self._remote_bank = RemoteBank(str(http.base_url), http.headers, http.timeout)
        return self._remote_bank

    @property
    def registry(self) -> Any:
        """`InvalidInput`: the checkpoints are the server's."""
        raise InvalidInput("registry", "the checkpoints are the server's: evaluate, promote, use_policy and rollback reach them")

    def watch_policies(self, interval_s: float = 10.0) -> None:
        """`InvalidInput`: the server serves what is promoted through it."""
        raise InvalidInput("watch_policies", "the server serves what is promoted through it; a remote client has nothing to follow")


class RemoteMemoryClient(_ServerOwned, MemoryClient):  # type: ignore[misc]
    """`MemoryClient` over HTTP to `memsdk serve`; made by ``MemoryClient(url=..., api_key=...)``.

    ``timeout``: seconds per request (`DEFAULT_TIMEOUT_S`); ``transport``: an httpx
    transport (tests, proxies). ``config`` holds local settings only (where the LangChain
    middleware keeps its outbox); the store, the policies and their versions are the server's.
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S, transport: httpx.BaseTransport | None = None, **local: Any) -> None:  # noqa: D107
        self.url = url.rstrip("/")
        self.config = ClientConfig.from_env(**local)
        self._closed = False
        self._http = httpx.Client(base_url=self.url, headers=auth_headers(api_key), timeout=timeout, transport=transport)

    def _send(self, plan: Plan[T]) -> T:
        self._check_open()
        return _sent(self._http, self.url, plan)

    @overload
    def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        single, plans = ingest_plans(turns, scope)
        results = [r for plan in plans for r in ([self._send(plan)] if single else self._send(plan))]
        return results[0] if single else results

    def ingest_accepted(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike, retries: int = ACCEPTED_RETRIES) -> builtins.list[AcceptedTurn]:
        """Put ``turns`` on the server's disk and return at once (``POST /v1/ingest/accepted``):
        an `AcceptedTurn` per turn, in order, each stored exactly once behind the reply. A turn
        without a ``turn_id`` is given one here, before the first attempt, so the request can
        be sent again (up to ``retries`` times, after a connection error or a 502 / 503 / 504):
        the server answers a turn_id its scope accepted before with that first acceptance's
        ticket and state (``repeat``), and queues nothing twice. A turn the store would refuse
        is refused now (`InvalidInput` naming ``turn.text``, ``turns[3].timestamp``), none of
        the request's turns queued."""
        self._check_open()
        return [t for plan in accepted_plans(turns, scope) for t in _sent(self._http, self.url, plan, retries=retries)]

    def ingest_status(self, ticket: str) -> TicketStatus:
        """Where the turn of ``ticket`` is: pending, done or dead (with the error);
        `MemoryNotFound` for a ticket of another tenant, or none."""
        return self._send(status_plan(ticket))

    def warm_up(self) -> None:
        """Nothing to load here: `memsdk serve` warms itself up before its ``/readyz`` says ready."""
        self._check_open()

    def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        return self._send(Plans.answer(question, scope))

    def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        self._send(Plans.feedback(trajectory_id, correct, gold))

    def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return self._send(Plans.search(query, scope, limit, tier, hybrid))

    def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> builtins.list[ScoredMemory]:
        return self._send(Plans.retrieve(question, scope))

    def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(Plans.get(memory_id, scope))

    def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return self._send(Plans.list(scope, include_deleted, limit, offset, tier))

    def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        return self._send(Plans.add(text, scope, metadata, tier))

    def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(Plans.update(memory_id, text, scope))

    def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(Plans.delete(memory_id, scope))

    def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(Plans.restore(memory_id, scope))

    def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:
        return self._send(Plans.history(memory_id, scope))

    def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        return self._send(Plans.forget(description, scope, dry_run))

    def erase(self, *, scope: ScopeLike) -> int:
        return self._send(Plans.erase(scope))

    def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        return self._send(Plans.export(dest, scope))

    def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        return self._send(Plans.read(source, scope, budget_tokens, chunk_tokens))

    def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        return self._send(Plans.import_(src, scope))

    @property
    def policies(self) -> dict[str, PolicyInfo]:
        return self._send(Plans.policies())

    @property
    def policy_stats(self) -> dict[str, dict[str, int]]:
        return self._send(Plans.policy_stats())

    def use_policy(self, role: str, version: str) -> None:
        self._send(Plans.use_policy(role, version))

    def rollback(self, role: str) -> None:
        self._send(Plans.rollback(role))

    def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        return self._send(Plans.evaluate_policy(role, version, against, on, config, k))

    def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        return self._send(Plans.promote(role, version, force, on, config))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._http.close()
            if self._remote_bank is not None:
                self._remote_bank.close()


class AsyncRemoteMemoryClient(_ServerOwned, AsyncMemoryClient):  # type: ignore[misc]
    """`AsyncMemoryClient` over HTTP to `memsdk serve`; made by ``AsyncMemoryClient(url=..., api_key=...)``."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S, transport: httpx.AsyncBaseTransport | None = None, **local: Any) -> None:  # noqa: D107
        self.url = url.rstrip("/")
        self.config = ClientConfig.from_env(**local)
        self._closed = False
        self._http = httpx.AsyncClient(base_url=self.url, headers=auth_headers(api_key), timeout=timeout, transport=transport)

    async def _send(self, plan: Plan[T], *, retries: int = 0) -> T:
        self._check_open()
        attempt = 0
        while True:
            r: httpx.Response | None = None
            try:
                r = await self._http.request(**plan.request())
            except httpx.TransportError as exc:
                if (wait := retry_in(attempt, retries, None)) is None:
                    raise unreachable(self.url, exc) from exc
            else:
                if (wait := retry_in(attempt, retries, r)) is None:
                    return settled(r, plan)
            await asyncio.sleep(wait)
            attempt += 1

    async def start(self) -> AsyncRemoteMemoryClient:
        return self  # the server loaded its policies when it started

    @overload
    async def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    async def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    async def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        single, plans = ingest_plans(turns, scope)
        results: list[IngestResult] = []
        for plan in plans:
            got = await self._send(plan)
            results += [got] if single else got
        return results[0] if single else results

    async def ingest_accepted(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike, retries: int = ACCEPTED_RETRIES) -> builtins.list[AcceptedTurn]:
        return [t for plan in accepted_plans(turns, scope) for t in await self._send(plan, retries=retries)]

    async def ingest_status(self, ticket: str) -> TicketStatus:
        return await self._send(status_plan(ticket))

    async def warm_up(self) -> None:
        """Nothing to load here: `memsdk serve` warms itself up before its ``/readyz`` says ready."""
        self._check_open()

    async def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        return await self._send(Plans.answer(question, scope))

    async def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        await self._send(Plans.feedback(trajectory_id, correct, gold))

    async def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return await self._send(Plans.search(query, scope, limit, tier, hybrid))

    async def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> builtins.list[ScoredMemory]:
        return await self._send(Plans.retrieve(question, scope))

    async def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(Plans.get(memory_id, scope))

    async def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return await self._send(Plans.list(scope, include_deleted, limit, offset, tier))

    async def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        return await self._send(Plans.add(text, scope, metadata, tier))

    async def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(Plans.update(memory_id, text, scope))

    async def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(Plans.delete(memory_id, scope))

    async def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(Plans.restore(memory_id, scope))

    async def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:
        return await self._send(Plans.history(memory_id, scope))

    async def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        return await self._send(Plans.forget(description, scope, dry_run))

    async def erase(self, *, scope: ScopeLike) -> int:
        return await self._send(Plans.erase(scope))

    async def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        return await self._send(Plans.export(dest, scope))

    async def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        return await self._send(Plans.read(source, scope, budget_tokens, chunk_tokens))

    async def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        return await self._send(Plans.import_(src, scope))

    async def use_policy(self, role: str, version: str) -> None:
        await self._send(Plans.use_policy(role, version))

    async def rollback(self, role: str) -> None:
        await self._send(Plans.rollback(role))

    async def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        return await self._send(Plans.evaluate_policy(role, version, against, on, config, k))

    async def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        return await self._send(Plans.promote(role, version, force, on, config))

    # properties cannot await: these two ask the server with a blocking request of their own
    @property
    def policies(self) -> dict[str, PolicyInfo]:
        return self._blocking(Plans.policies())

    @property
    def policy_stats(self) -> dict[str, dict[str, int]]:
        return self._blocking(Plans.policy_stats())

    def _blocking(self, plan: Plan[T]) -> T:
        self._check_open()
        return self.bank._send(plan)  # the bank's blocking connection to the same server

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._http.aclose()
            if self._remote_bank is not None:
                self._remote_bank.close()


# the async client's docstrings are its sync twin's, set when memsdk.client was imported
documented_as(RemoteMemoryClient, MemoryClient)
documented_as(AsyncRemoteMemoryClient, AsyncMemoryClient)
documented_as(AsyncRemoteMemoryClient, RemoteMemoryClient)  # the calls only a remote client has
