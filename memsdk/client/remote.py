"""The client's API over HTTP: ``MemoryClient(url=..., api_key=...)`` talks to `memsdk serve`.

qdrant-client's pattern: one client class, several transports. ``MemoryClient()`` is the
embedded store in this process; ``MemoryClient(url="http://memsdk:8080", api_key=...)``
returns a `RemoteMemoryClient`, a `MemoryClient` whose every call is one request to a
server that owns the store and the policies (``AsyncMemoryClient(url=...)``: the async
twin). Same methods, same result types, same typed errors: the server sends each error as a
problem document naming its type, field and reason (`memsdk.server.app`), and `_raise`
raises that type again here. A server that cannot be reached is `StoreUnavailable`; a
refused key `NotAuthorized`.

Each call is planned once, without I/O (`_Plan`: the request, and how to read its reply),
and sent by the sync client with `httpx.Client` or by the async one with
`httpx.AsyncClient`, so the two cannot drift apart. The scope is the app's own: the server
binds it to the key's tenant.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, IO, TypeVar, overload

import builtins
import httpx
from pydantic import TypeAdapter

from memsdk.bank import BankLimits
from memsdk.client._base import ScopeLike, TurnLike
from memsdk.client.aio import AsyncMemoryClient
from memsdk.client.results import AnswerResult, ForgetResult, IngestResult, ReadResult
from memsdk.client.sync import MemoryClient
from memsdk.docstrings import documented_as
from memsdk.config import ClientConfig
from memsdk.errors import BackendError, ClientClosed, Conflict, EmbedderError, ImportConflict, InvalidInput, MemoryNotFound, MemsdkError, NotAuthorized, PolicyError, PolicyUnavailable, ScopeRequired, StoreError, StoreUnavailable
from memsdk.gate import GateConfig, GateDecision, GateFailed, GateStates
from memsdk.serving.policy_set import PolicyInfo
from memsdk.types import HistoryEvent, MemoryRecord, Scope, ScoredMemory, Tier, Turn

__all__ = ["RemoteMemoryClient", "AsyncRemoteMemoryClient", "RemoteBank", "DEFAULT_TIMEOUT_S"]

T = TypeVar("T")

#: seconds a request may take: an answer over a small CPU model takes seconds, a gate minutes
DEFAULT_TIMEOUT_S = 120.0
#: turns per ingest request (the server's limit is 1000)
BATCH_TURNS = 500

_RECORD = TypeAdapter(MemoryRecord)
_RECORDS = TypeAdapter(list[MemoryRecord])
_SCORED = TypeAdapter(list[ScoredMemory])
_EVENTS = TypeAdapter(list[HistoryEvent])
_INGESTS = TypeAdapter(list[IngestResult])
_POLICIES = TypeAdapter(dict[str, PolicyInfo])


@dataclass(frozen=True)
class _Plan(Generic[T]):
    """One request and how to read its reply."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    content: bytes | None = None
    memory_id: str | None = None  # what a 404 names

    def request(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "url": self.path, "params": self.params}
        if self.content is not None:
            out |= {"content": self.content, "headers": {"content-type": "application/x-ndjson"}}
        elif self.json is not None:
            out["json"] = self.json
        return out


# -- arguments as JSON ------------------------------------------------------------------------


def _scope(scope: Any, name: str = "scope") -> dict[str, Any]:
    if isinstance(scope, Scope):
        return scope.model_dump(exclude_none=True)
    if isinstance(scope, dict):
        return scope
    raise InvalidInput(name, f"must be a Scope or a dict of user_id / agent_id / run_id, got {type(scope).__name__}")


def _scopes(scope: Any) -> dict[str, Any]:
    """``{"scope": ...}`` for one scope, ``{"scopes": [...]}`` for several."""
    if isinstance(scope, (Scope, dict)):
        return {"scope": _scope(scope)}
    if isinstance(scope, Sequence) and not isinstance(scope, str):
        return {"scopes": [_scope(s, f"scope[{i}]") for i, s in enumerate(scope)]}
    return {"scope": _scope(scope)}


def _turn(turn: Any) -> Any:
    return turn.model_dump(mode="json", exclude_none=True) if isinstance(turn, Turn) else turn


def _query(scope: Any) -> dict[str, Any]:
    return {k: v for k, v in _scope(scope).items() if v is not None}


def _id(memory_id: uuid.UUID | str) -> str:
    return str(memory_id)


def _tier(tier: Tier | str | None) -> str | None:
    return None if tier is None else str(tier.value if isinstance(tier, Tier) else tier)


# -- the plans --------------------------------------------------------------------------------


def _ingest_plans(turns: Any, scope: Any) -> tuple[bool, list[_Plan[Any]]]:
    """(one turn?, the requests): a batch per `BATCH_TURNS` turns of one scope; a scope
    chosen per turn (a callable) is one request per turn, in order."""
    if isinstance(turns, (Turn, dict)):
        resolved = scope(turns if isinstance(turns, Turn) else Turn.model_validate(turns)) if callable(scope) else scope
        return True, [_Plan("POST", "/v1/ingest", _one, json={"scope": _scope(resolved), "turn": _turn(turns)})]
    items = list(turns)
    if callable(scope):
        return False, [_Plan("POST", "/v1/ingest", _one_as_list, json={"scope": _scope(scope(t if isinstance(t, Turn) else Turn.model_validate(t))), "turn": _turn(t)}) for t in items]
    body = _scope(scope)
    return False, [_Plan("POST", "/v1/ingest", _many, json={"scope": body, "turns": [_turn(t) for t in items[i : i + BATCH_TURNS]]}) for i in range(0, len(items), BATCH_TURNS)]


def _one(r: httpx.Response) -> IngestResult:
    return IngestResult.model_validate(r.json())


def _one_as_list(r: httpx.Response) -> list[IngestResult]:
    return [_one(r)]


def _many(r: httpx.Response) -> list[IngestResult]:
    return _INGESTS.validate_python(r.json())


def _record(r: httpx.Response) -> MemoryRecord:
    return _RECORD.validate_python(r.json())


def _nothing(r: httpx.Response) -> None:
    return None


def _export_lines(dest: str | os.PathLike[str] | IO[str], text: str) -> int:
    lines = [line for line in text.splitlines() if line.strip()]
    if isinstance(dest, (str, os.PathLike)):
        Path(dest).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    else:
        dest.writelines(line + "\n" for line in lines)
    count: int = json.loads(lines[0])["records"] if lines else 0
    return count


def _import_body(src: str | os.PathLike[str] | IO[str]) -> bytes:
    text = Path(src).read_text(encoding="utf-8") if isinstance(src, (str, os.PathLike)) else src.read()
    return text.encode("utf-8")


class _Plans:
    """Every call of the client as a plan; the two remote clients send them."""

    @staticmethod
    def answer(question: str, scope: Any) -> _Plan[AnswerResult]:
        return _Plan("POST", "/v1/answer", lambda r: AnswerResult.model_validate(r.json()), json={"question": question, **_scopes(scope)})

    @staticmethod
    def retrieve(question: str, scope: Any) -> _Plan[list[ScoredMemory]]:
        return _Plan("POST", "/v1/retrieve", lambda r: _SCORED.validate_python(r.json()), json={"question": question, **_scopes(scope)})

    @staticmethod
    def search(query: str, scope: Any, limit: int, tier: Tier | str | None, hybrid: bool) -> _Plan[list[ScoredMemory]]:
        return _Plan("POST", "/v1/search", lambda r: _SCORED.validate_python(r.json()), json={"query": query, "scope": _scope(scope), "limit": limit, "tier": _tier(tier), "hybrid": hybrid})

    @staticmethod
    def feedback(trajectory_id: uuid.UUID | str, correct: bool | None, gold: str | None) -> _Plan[None]:
        return _Plan("POST", "/v1/feedback", _nothing, json={"trajectory_id": str(trajectory_id), "correct": correct, "gold": gold}, memory_id=str(trajectory_id))

    @staticmethod
    def get(memory_id: uuid.UUID | str, scope: Any) -> _Plan[MemoryRecord]:
        return _Plan("GET", f"/v1/memories/{_id(memory_id)}", _record, params=_query(scope), memory_id=_id(memory_id))

    @staticmethod
    def list(scope: Any, include_deleted: bool, limit: int | None, offset: int, tier: Tier | str | None) -> _Plan[builtins.list[MemoryRecord]]:
        params = {**_query(scope), "include_deleted": include_deleted, "offset": offset}
        params |= {k: v for k, v in {"limit": limit, "tier": _tier(tier)}.items() if v is not None}
        return _Plan("GET", "/v1/memories", lambda r: _RECORDS.validate_python(r.json()), params=params)

    @staticmethod
    def add(text: str, scope: Any, metadata: dict[str, Any] | None, tier: Tier | str) -> _Plan[MemoryRecord]:
        return _Plan("POST", "/v1/memories", _record, json={"text": text, "scope": _scope(scope), "metadata": metadata, "tier": _tier(tier)})

    @staticmethod
    def update(memory_id: uuid.UUID | str, text: str, scope: Any) -> _Plan[MemoryRecord]:
        return _Plan("PATCH", f"/v1/memories/{_id(memory_id)}", _record, json={"text": text, "scope": _scope(scope)}, memory_id=_id(memory_id))

    @staticmethod
    def delete(memory_id: uuid.UUID | str, scope: Any) -> _Plan[MemoryRecord]:
        return _Plan("DELETE", f"/v1/memories/{_id(memory_id)}", _record, params=_query(scope), memory_id=_id(memory_id))

    @staticmethod
    def restore(memory_id: uuid.UUID | str, scope: Any) -> _Plan[MemoryRecord]:
        return _Plan("POST", f"/v1/memories/{_id(memory_id)}/restore", _record, json={"scope": _scope(scope)}, memory_id=_id(memory_id))

    @staticmethod
    def history(memory_id: uuid.UUID | str | None, scope: Any) -> _Plan[builtins.list[HistoryEvent]]:
        params = _query(scope) | ({} if memory_id is None else {"memory_id": _id(memory_id)})
        return _Plan("GET", "/v1/history", lambda r: _EVENTS.validate_python(r.json()), params=params, memory_id=None if memory_id is None else _id(memory_id))

    @staticmethod
    def forget(description: str, scope: Any, dry_run: bool) -> _Plan[ForgetResult]:
        return _Plan("POST", "/v1/forget", lambda r: ForgetResult.model_validate(r.json()), json={"description": description, "scope": _scope(scope), "dry_run": dry_run})

    @staticmethod
    def erase(scope: Any) -> _Plan[int]:
        return _Plan("POST", "/v1/erase", lambda r: int(r.json()["erased"]), json={"scope": _scope(scope)})

    @staticmethod
    def export(dest: str | os.PathLike[str] | IO[str], scope: Any) -> _Plan[int]:
        return _Plan("POST", "/v1/export", lambda r: _export_lines(dest, r.text), json={"scope": _scope(scope)})

    @staticmethod
    def import_(src: str | os.PathLike[str] | IO[str], scope: Any) -> _Plan[int]:
        return _Plan("POST", "/v1/import", lambda r: int(r.json()["imported"]), params={} if scope is None else _query(scope), content=_import_body(src))

    @staticmethod
    def read(source: str | Iterable[TurnLike], scope: Any, budget_tokens: int, chunk_tokens: int) -> _Plan[ReadResult]:
        body = source if isinstance(source, str) else [_turn(t) for t in source]
        return _Plan("POST", "/v1/read", lambda r: ReadResult.model_validate(r.json()), json={"source": body, "scope": _scope(scope), "budget_tokens": budget_tokens, "chunk_tokens": chunk_tokens})

    @staticmethod
    def policies() -> _Plan[dict[str, PolicyInfo]]:
        return _Plan("GET", "/v1/policies", lambda r: _POLICIES.validate_python(r.json()))

    @staticmethod
    def policy_stats() -> _Plan[dict[str, dict[str, int]]]:
        return _Plan("GET", "/v1/policies/stats", lambda r: {k: dict(v) for k, v in r.json().items()})

    @staticmethod
    def use_policy(role: str, version: str) -> _Plan[None]:
        return _Plan("POST", f"/v1/policies/{role}/use", _nothing, json={"version": version})

    @staticmethod
    def rollback(role: str) -> _Plan[None]:
        return _Plan("POST", f"/v1/policies/{role}/rollback", _nothing)

    @staticmethod
    def evaluate_policy(role: str, version: str, against: str | None, on: GateStates, config: GateConfig, k: int | None) -> _Plan[GateDecision]:
        _server_gate(on, config, k)
        return _Plan("POST", f"/v1/policies/{role}/evaluate", lambda r: GateDecision.model_validate(r.json()), json={"version": version, "against": against, "on": on})

    @staticmethod
    def promote(role: str, version: str, force: bool, on: GateStates, config: GateConfig) -> _Plan[GateDecision | None]:
        _server_gate(on, config, None)

        def read(r: httpx.Response) -> GateDecision | None:
            decision = r.json()["decision"]
            return None if decision is None else GateDecision.model_validate(decision)

        return _Plan("POST", f"/v1/policies/{role}/promote", read, json={"version": version, "force": force, "on": on})


def _server_gate(on: GateStates, config: GateConfig, k: int | None) -> None:
    """A remote gate runs on the server, on the states it has: LoCoMo's val split or its log."""
    if not isinstance(on, str) or on not in ("locomo-val", "log"):
        raise InvalidInput("on", "a remote client gates on the server's 'locomo-val' or 'log' states")
    if config != GateConfig() or k is not None:
        raise InvalidInput("config", "a remote gate runs with the server's gate settings")


# -- replies as errors ------------------------------------------------------------------------

_BY_TITLE: dict[str, type[MemsdkError]] = {
    cls.__name__: cls
    for cls in (ClientClosed, StoreError, StoreUnavailable, EmbedderError, PolicyError, PolicyUnavailable, BackendError)
}


def _raise(r: httpx.Response, plan: _Plan[Any]) -> None:
    """The typed error a problem reply names, as the embedded client would raise it."""
    try:
        body = r.json()
    except ValueError:
        body = {}
    title, detail = str(body.get("title", "")), str(body.get("detail", r.text[:200]))
    field, reason = body.get("field") or "body", body.get("reason") or detail
    if r.status_code in (401, 403):
        raise NotAuthorized(detail, status_code=r.status_code)
    if title == "MemoryNotFound":
        raise MemoryNotFound(plan.memory_id or "?", field=field)
    if title == "ScopeRequired":
        raise ScopeRequired(field, reason)
    if title in ("InvalidInput", "PayloadTooLarge"):
        raise InvalidInput(field, reason)
    if title == "GateFailed" and isinstance(body.get("decision"), dict):
        raise GateFailed(GateDecision.model_validate(body["decision"]))
    if title in ("ImportConflict", "Conflict"):
        raise (ImportConflict if title == "ImportConflict" else Conflict)(field, reason)
    if title == "BackendError":
        raise BackendError(detail, status_code=body.get("status_code"))
    if title in _BY_TITLE:
        raise _BY_TITLE[title](detail)
    if title in ("ModelNotFound", "ContextTooLong", "BackendTimeout", "GateFailed"):  # subclasses whose fields do not travel
        raise (PolicyUnavailable if title == "BackendTimeout" else PolicyError)(detail)
    raise MemsdkError(f"memsdk server replied {r.status_code}: {detail}")


def _sent(http: httpx.Client, url: str, plan: _Plan[T]) -> T:
    """``plan`` sent on a blocking connection, its reply read or raised."""
    try:
        r = http.request(**plan.request())
    except httpx.TransportError as exc:
        raise _unreachable(url, exc) from exc
    return _settled(r, plan)


def _settled(r: httpx.Response, plan: _Plan[T]) -> T:
    if r.status_code >= 400:
        _raise(r, plan)
    return plan.read(r)


def _unreachable(url: str, exc: httpx.TransportError) -> StoreUnavailable:
    return StoreUnavailable(f"memsdk server at {url} cannot be reached: {type(exc).__name__}: {exc}")


def _headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}



# -- the clients ------------------------------------------------------------------------------


class RemoteBank:
    """The part of the server's `MemoryBank` a remote client reaches (``client.bank``): the
    calls the LangGraph store makes (`memsdk_adapters.langchain.store`), in the tenant's
    scopes. Blocking, on a connection of its own, so an async client's store can run it
    in a worker thread as it runs an embedded bank."""

    def __init__(self, url: str, headers: Any, timeout: Any) -> None:
        self._http = httpx.Client(base_url=url, headers=headers, timeout=timeout)
        self.url = url

    def _send(self, plan: _Plan[T]) -> T:
        return _sent(self._http, self.url, plan)

    @functools.cached_property
    def limits(self) -> BankLimits:
        return self._send(_Plan("GET", "/v1/limits", lambda r: BankLimits(**r.json())))

    def list(self, scope: ScopeLike, *, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return self._send(_Plans.list(scope, include_deleted, limit, offset, tier))

    def search(self, scope: ScopeLike, query: str, *, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return self._send(_Plans.search(query, scope, limit, tier, hybrid))

    def scopes(self, *, limit: int = 100_000) -> builtins.list[Scope]:
        return self._send(_Plan("GET", "/v1/scopes", lambda r: [Scope.model_validate(s) for s in r.json()][:limit]))

    def apply(self, scope: ScopeLike, ops: Iterable[Any], *, actor: Any = None) -> builtins.list[MemoryRecord]:
        """The batch, as the API actor (the server's choice, whatever ``actor`` says); the records it wrote."""
        body = [o.model_dump(mode="json") if hasattr(o, "model_dump") else o for o in ops]
        return self._send(_Plan("POST", "/v1/apply", lambda r: _RECORDS.validate_python(r.json()), json={"scope": _scope(scope), "ops": body}))

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
        self._http = httpx.Client(base_url=self.url, headers=_headers(api_key), timeout=timeout, transport=transport)

    def _send(self, plan: _Plan[T]) -> T:
        self._check_open()
        return _sent(self._http, self.url, plan)

    @overload
    def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        single, plans = _ingest_plans(turns, scope)
        results = [r for plan in plans for r in ([self._send(plan)] if single else self._send(plan))]
        return results[0] if single else results

    def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        return self._send(_Plans.answer(question, scope))

    def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        self._send(_Plans.feedback(trajectory_id, correct, gold))

    def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return self._send(_Plans.search(query, scope, limit, tier, hybrid))

    def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> builtins.list[ScoredMemory]:
        return self._send(_Plans.retrieve(question, scope))

    def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(_Plans.get(memory_id, scope))

    def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return self._send(_Plans.list(scope, include_deleted, limit, offset, tier))

    def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        return self._send(_Plans.add(text, scope, metadata, tier))

    def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(_Plans.update(memory_id, text, scope))

    def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(_Plans.delete(memory_id, scope))

    def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return self._send(_Plans.restore(memory_id, scope))

    def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:
        return self._send(_Plans.history(memory_id, scope))

    def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        return self._send(_Plans.forget(description, scope, dry_run))

    def erase(self, *, scope: ScopeLike) -> int:
        return self._send(_Plans.erase(scope))

    def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        return self._send(_Plans.export(dest, scope))

    def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        return self._send(_Plans.read(source, scope, budget_tokens, chunk_tokens))

    def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        return self._send(_Plans.import_(src, scope))

    @property
    def policies(self) -> dict[str, PolicyInfo]:
        return self._send(_Plans.policies())

    @property
    def policy_stats(self) -> dict[str, dict[str, int]]:
        return self._send(_Plans.policy_stats())

    def use_policy(self, role: str, version: str) -> None:
        self._send(_Plans.use_policy(role, version))

    def rollback(self, role: str) -> None:
        self._send(_Plans.rollback(role))

    def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        return self._send(_Plans.evaluate_policy(role, version, against, on, config, k))

    def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        return self._send(_Plans.promote(role, version, force, on, config))

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
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(api_key), timeout=timeout, transport=transport)

    async def _send(self, plan: _Plan[T]) -> T:
        self._check_open()
        try:
            r = await self._http.request(**plan.request())
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _settled(r, plan)

    async def start(self) -> AsyncRemoteMemoryClient:
        return self  # the server loaded its policies when it started

    @overload
    async def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    async def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    async def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        single, plans = _ingest_plans(turns, scope)
        results: list[IngestResult] = []
        for plan in plans:
            got = await self._send(plan)
            results += [got] if single else got
        return results[0] if single else results

    async def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        return await self._send(_Plans.answer(question, scope))

    async def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        await self._send(_Plans.feedback(trajectory_id, correct, gold))

    async def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        return await self._send(_Plans.search(query, scope, limit, tier, hybrid))

    async def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> builtins.list[ScoredMemory]:
        return await self._send(_Plans.retrieve(question, scope))

    async def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(_Plans.get(memory_id, scope))

    async def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> builtins.list[MemoryRecord]:
        return await self._send(_Plans.list(scope, include_deleted, limit, offset, tier))

    async def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        return await self._send(_Plans.add(text, scope, metadata, tier))

    async def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(_Plans.update(memory_id, text, scope))

    async def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(_Plans.delete(memory_id, scope))

    async def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        return await self._send(_Plans.restore(memory_id, scope))

    async def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:
        return await self._send(_Plans.history(memory_id, scope))

    async def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        return await self._send(_Plans.forget(description, scope, dry_run))

    async def erase(self, *, scope: ScopeLike) -> int:
        return await self._send(_Plans.erase(scope))

    async def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        return await self._send(_Plans.export(dest, scope))

    async def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        return await self._send(_Plans.read(source, scope, budget_tokens, chunk_tokens))

    async def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        return await self._send(_Plans.import_(src, scope))

    async def use_policy(self, role: str, version: str) -> None:
        await self._send(_Plans.use_policy(role, version))

    async def rollback(self, role: str) -> None:
        await self._send(_Plans.rollback(role))

    async def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        return await self._send(_Plans.evaluate_policy(role, version, against, on, config, k))

    async def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        return await self._send(_Plans.promote(role, version, force, on, config))

    # properties cannot await: these two ask the server with a blocking request of their own
    @property
    def policies(self) -> dict[str, PolicyInfo]:
        return self._blocking(_Plans.policies())

    @property
    def policy_stats(self) -> dict[str, dict[str, int]]:
        return self._blocking(_Plans.policy_stats())

    def _blocking(self, plan: _Plan[T]) -> T:
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
