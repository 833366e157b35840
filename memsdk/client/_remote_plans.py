"""The remote clients' calls as plans, with no I/O (httpx's BaseClient pattern).

Each call of `memsdk.client.remote`'s clients is planned here once (`Plans`: the request,
and how to read its reply), and sent by the sync client with `httpx.Client` or by the async
one with `httpx.AsyncClient`, so the two cannot drift apart. A reply that is a problem
document (`memsdk.server.problems`) is raised here as the typed error the embedded client
would raise (`settled`). Accepted ingests are the one call sent again on failure
(`retry_in`): each turn carries its turn_id from the first attempt, and the server answers
a turn_id it accepted before with the ticket of that first acceptance, so a retry after a
lost reply queues nothing twice.
"""

from __future__ import annotations

import builtins
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from memsdk.client._base import TurnLike
from memsdk.client.results import AcceptedTurn, AnswerResult, ForgetResult, IngestResult, ReadResult, TicketStatus
from memsdk.errors import BackendError, ClientClosed, Conflict, EmbedderError, ImportConflict, InvalidInput, MemoryNotFound, MemsdkError, NotAuthorized, PolicyError, PolicyUnavailable, ScopeRequired, StoreError, StoreUnavailable
from memsdk.gate import GateConfig, GateDecision, GateFailed, GateStates
from memsdk.outbox import retry_delay
from memsdk.serving.policy_set import PolicyInfo
from memsdk.types import HistoryEvent, MemoryRecord, Scope, ScoredMemory, Tier, Turn

__all__ = [
    "Plan", "Plans", "BATCH_TURNS", "RECORDS", "ACCEPTED_RETRIES", "ingest_plans", "accepted_plans", "retry_in", "settled", "unreachable", "auth_headers",
    "scope_json", "status_plan",
]  # fmt: skip

T = TypeVar("T")

#: turns per ingest request (the server's limit is 1000)
BATCH_TURNS = 500

_RECORD = TypeAdapter(MemoryRecord)
RECORDS = TypeAdapter(list[MemoryRecord])
_SCORED = TypeAdapter(list[ScoredMemory])
_EVENTS = TypeAdapter(list[HistoryEvent])
_INGESTS = TypeAdapter(list[IngestResult])
_POLICIES = TypeAdapter(dict[str, PolicyInfo])
_ACCEPTED = TypeAdapter(list[AcceptedTurn])


@dataclass(frozen=True)
class Plan(Generic[T]):
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


def scope_json(scope: Any, name: str = "scope") -> dict[str, Any]:
    if isinstance(scope, Scope):
        return scope.model_dump(exclude_none=True)
    if isinstance(scope, dict):
        return scope
    raise InvalidInput(name, f"must be a Scope or a dict of user_id / agent_id / run_id, got {type(scope).__name__}")


def _scopes(scope: Any) -> dict[str, Any]:
    """``{"scope": ...}`` for one scope, ``{"scopes": [...]}`` for several."""
    if isinstance(scope, (Scope, dict)):
        return {"scope": scope_json(scope)}
    if isinstance(scope, Sequence) and not isinstance(scope, str):
        return {"scopes": [scope_json(s, f"scope[{i}]") for i, s in enumerate(scope)]}
    return {"scope": scope_json(scope)}


def _turn(turn: Any) -> Any:
    return turn.model_dump(mode="json", exclude_none=True) if isinstance(turn, Turn) else turn


def _query(scope: Any) -> dict[str, Any]:
    return {k: v for k, v in scope_json(scope).items() if v is not None}


def _id(memory_id: uuid.UUID | str) -> str:
    return str(memory_id)


def _tier(tier: Tier | str | None) -> str | None:
    return None if tier is None else str(tier.value if isinstance(tier, Tier) else tier)


# -- the plans --------------------------------------------------------------------------------


def ingest_plans(turns: Any, scope: Any) -> tuple[bool, list[Plan[Any]]]:
    """(one turn?, the requests): a batch per `BATCH_TURNS` turns of one scope; a scope
    chosen per turn (a callable) is one request per turn, in order."""
    if isinstance(turns, (Turn, dict)):
        resolved = scope(turns if isinstance(turns, Turn) else Turn.model_validate(turns)) if callable(scope) else scope
        return True, [Plan("POST", "/v1/ingest", _one, json={"scope": scope_json(resolved), "turn": _turn(turns)})]
    items = list(turns)
    if callable(scope):
        return False, [Plan("POST", "/v1/ingest", _one_as_list, json={"scope": scope_json(scope(t if isinstance(t, Turn) else Turn.model_validate(t))), "turn": _turn(t)}) for t in items]
    body = scope_json(scope)
    return False, [Plan("POST", "/v1/ingest", _many, json={"scope": body, "turns": [_turn(t) for t in items[i : i + BATCH_TURNS]]}) for i in range(0, len(items), BATCH_TURNS)]


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


class Plans:
    """Every call of the client as a plan; the two remote clients send them."""

    @staticmethod
    def answer(question: str, scope: Any) -> Plan[AnswerResult]:
        return Plan("POST", "/v1/answer", lambda r: AnswerResult.model_validate(r.json()), json={"question": question, **_scopes(scope)})

    @staticmethod
    def retrieve(question: str, scope: Any) -> Plan[list[ScoredMemory]]:
        return Plan("POST", "/v1/retrieve", lambda r: _SCORED.validate_python(r.json()), json={"question": question, **_scopes(scope)})

    @staticmethod
    def search(query: str, scope: Any, limit: int, tier: Tier | str | None, hybrid: bool) -> Plan[list[ScoredMemory]]:
        return Plan("POST", "/v1/search", lambda r: _SCORED.validate_python(r.json()), json={"query": query, "scope": scope_json(scope), "limit": limit, "tier": _tier(tier), "hybrid": hybrid})

    @staticmethod
    def feedback(trajectory_id: uuid.UUID | str, correct: bool | None, gold: str | None) -> Plan[None]:
        return Plan("POST", "/v1/feedback", _nothing, json={"trajectory_id": str(trajectory_id), "correct": correct, "gold": gold}, memory_id=str(trajectory_id))

    @staticmethod
    def get(memory_id: uuid.UUID | str, scope: Any) -> Plan[MemoryRecord]:
        return Plan("GET", f"/v1/memories/{_id(memory_id)}", _record, params=_query(scope), memory_id=_id(memory_id))

    @staticmethod
    def list(scope: Any, include_deleted: bool, limit: int | None, offset: int, tier: Tier | str | None) -> Plan[builtins.list[MemoryRecord]]:
        params = {**_query(scope), "include_deleted": include_deleted, "offset": offset}
        params |= {k: v for k, v in {"limit": limit, "tier": _tier(tier)}.items() if v is not None}
        return Plan("GET", "/v1/memories", lambda r: RECORDS.validate_python(r.json()), params=params)

    @staticmethod
    def add(text: str, scope: Any, metadata: dict[str, Any] | None, tier: Tier | str) -> Plan[MemoryRecord]:
        return Plan("POST", "/v1/memories", _record, json={"text": text, "scope": scope_json(scope), "metadata": metadata, "tier": _tier(tier)})

    @staticmethod
    def update(memory_id: uuid.UUID | str, text: str, scope: Any) -> Plan[MemoryRecord]:
        return Plan("PATCH", f"/v1/memories/{_id(memory_id)}", _record, json={"text": text, "scope": scope_json(scope)}, memory_id=_id(memory_id))

    @staticmethod
    def delete(memory_id: uuid.UUID | str, scope: Any) -> Plan[MemoryRecord]:
        return Plan("DELETE", f"/v1/memories/{_id(memory_id)}", _record, params=_query(scope), memory_id=_id(memory_id))

    @staticmethod
    def restore(memory_id: uuid.UUID | str, scope: Any) -> Plan[MemoryRecord]:
        return Plan("POST", f"/v1/memories/{_id(memory_id)}/restore", _record, json={"scope": scope_json(scope)}, memory_id=_id(memory_id))

    @staticmethod
    def history(memory_id: uuid.UUID | str | None, scope: Any) -> Plan[builtins.list[HistoryEvent]]:
        params = _query(scope) | ({} if memory_id is None else {"memory_id": _id(memory_id)})
        return Plan("GET", "/v1/history", lambda r: _EVENTS.validate_python(r.json()), params=params, memory_id=None if memory_id is None else _id(memory_id))

    @staticmethod
    def forget(description: str, scope: Any, dry_run: bool) -> Plan[ForgetResult]:
        return Plan("POST", "/v1/forget", lambda r: ForgetResult.model_validate(r.json()), json={"description": description, "scope": scope_json(scope), "dry_run": dry_run})

    @staticmethod
    def erase(scope: Any) -> Plan[int]:
        return Plan("POST", "/v1/erase", lambda r: int(r.json()["erased"]), json={"scope": scope_json(scope)})

    @staticmethod
    def export(dest: str | os.PathLike[str] | IO[str], scope: Any) -> Plan[int]:
        return Plan("POST", "/v1/export", lambda r: _export_lines(dest, r.text), json={"scope": scope_json(scope)})

    @staticmethod
    def import_(src: str | os.PathLike[str] | IO[str], scope: Any) -> Plan[int]:
        return Plan("POST", "/v1/import", lambda r: int(r.json()["imported"]), params={} if scope is None else _query(scope), content=_import_body(src))

    @staticmethod
    def read(source: str | Iterable[TurnLike], scope: Any, budget_tokens: int, chunk_tokens: int) -> Plan[ReadResult]:
        body = source if isinstance(source, str) else [_turn(t) for t in source]
        return Plan("POST", "/v1/read", lambda r: ReadResult.model_validate(r.json()), json={"source": body, "scope": scope_json(scope), "budget_tokens": budget_tokens, "chunk_tokens": chunk_tokens})

    @staticmethod
    def policies() -> Plan[dict[str, PolicyInfo]]:
        return Plan("GET", "/v1/policies", lambda r: _POLICIES.validate_python(r.json()))

    @staticmethod
    def policy_stats() -> Plan[dict[str, dict[str, int]]]:
        return Plan("GET", "/v1/policies/stats", lambda r: {k: dict(v) for k, v in r.json().items()})

    @staticmethod
    def use_policy(role: str, version: str) -> Plan[None]:
        return Plan("POST", f"/v1/policies/{role}/use", _nothing, json={"version": version})

    @staticmethod
    def rollback(role: str) -> Plan[None]:
        return Plan("POST", f"/v1/policies/{role}/rollback", _nothing)

    @staticmethod
    def evaluate_policy(role: str, version: str, against: str | None, on: GateStates, config: GateConfig, k: int | None) -> Plan[GateDecision]:
        _server_gate(on, config, k)
        return Plan("POST", f"/v1/policies/{role}/evaluate", lambda r: GateDecision.model_validate(r.json()), json={"version": version, "against": against, "on": on})

    @staticmethod
    def promote(role: str, version: str, force: bool, on: GateStates, config: GateConfig) -> Plan[GateDecision | None]:
        _server_gate(on, config, None)

        def read(r: httpx.Response) -> GateDecision | None:
            decision = r.json()["decision"]
            return None if decision is None else GateDecision.model_validate(decision)

        return Plan("POST", f"/v1/policies/{role}/promote", read, json={"version": version, "force": force, "on": on})


def _server_gate(on: GateStates, config: GateConfig, k: int | None) -> None:
    """A remote gate runs on the server, on the states it has: LoCoMo's val split or its log."""
    if not isinstance(on, str) or on not in ("locomo-val", "log"):
        raise InvalidInput("on", "a remote client gates on the server's 'locomo-val' or 'log' states")
    if config != GateConfig() or k is not None:
        raise InvalidInput("config", "a remote gate runs with the server's gate settings")


# -- accepted ingests, and sending them again -------------------------------------------------

#: how many times an accepted ingest is sent again after a connection error or a 502 / 503 / 504
ACCEPTED_RETRIES = 5
#: the first wait before sending again, and the most (doubling, with jitter: `retry_delay`)
RETRY_INITIAL_S, RETRY_MAX_S = 0.5, 8.0
#: replies that say "not now" (a proxy without its server, a server stopping or full)
_RETRIED_STATUS = frozenset({502, 503, 504})


def _named(turns: TurnLike | Iterable[TurnLike]) -> tuple[bool, list[Turn]]:
    """(one turn?, the turns), each with a turn_id: the caller's, or one given here, so that
    every attempt sends the same identity. A malformed turn is `InvalidInput` naming its
    field, as the server would name it."""
    single = isinstance(turns, (Turn, dict))
    items: list[TurnLike] = [turns] if isinstance(turns, (Turn, dict)) else list(turns)
    if not items:
        raise InvalidInput("turns", "no turns given")
    named = []
    for i, item in enumerate(items):
        try:
            turn = item if isinstance(item, Turn) else Turn.model_validate(item)
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, "turn" if single else f"turns[{i}]") from None
        named.append(turn if turn.turn_id is not None else turn.model_copy(update={"turn_id": f"client-{uuid.uuid4().hex}"}))
    return single, named


def accepted_plans(turns: TurnLike | Iterable[TurnLike], scope: Any) -> list[Plan[list[AcceptedTurn]]]:
    """The requests of an accepted ingest: one turn as ``turn``, a list in batches of
    `BATCH_TURNS` as ``turns`` (so the server's field names are the caller's)."""
    single, named = _named(turns)
    body = scope_json(scope)
    if single:
        return [Plan("POST", "/v1/ingest/accepted", _accepted, json={"scope": body, "turn": _turn(named[0])})]
    return [Plan("POST", "/v1/ingest/accepted", _accepted, json={"scope": body, "turns": [_turn(t) for t in named[i : i + BATCH_TURNS]]}) for i in range(0, len(named), BATCH_TURNS)]


def _accepted(r: httpx.Response) -> list[AcceptedTurn]:
    return _ACCEPTED.validate_python(r.json()["turns"])


def status_plan(ticket: str) -> Plan[TicketStatus]:
    return Plan("GET", f"/v1/ingest/accepted/{ticket}", lambda r: TicketStatus.model_validate(r.json()), memory_id=ticket)


def retry_in(attempt: int, retries: int, reply: httpx.Response | None) -> float | None:
    """Seconds to wait before sending attempt ``attempt + 1`` of an accepted ingest, or None
    to stop: after a connection error (``reply`` None) or a "not now" reply, up to ``retries``
    times again; never after any other reply."""
    if attempt >= retries or (reply is not None and reply.status_code not in _RETRIED_STATUS):
        return None
    return retry_delay(attempt + 1, RETRY_INITIAL_S, RETRY_MAX_S)


# -- replies as errors ------------------------------------------------------------------------

_BY_TITLE: dict[str, type[MemsdkError]] = {
    cls.__name__: cls
    for cls in (ClientClosed, StoreError, StoreUnavailable, EmbedderError, PolicyError, PolicyUnavailable, BackendError)
}


def _raise(r: httpx.Response, plan: Plan[Any]) -> None:
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


def settled(r: httpx.Response, plan: Plan[T]) -> T:
    if r.status_code >= 400:
        _raise(r, plan)
    return plan.read(r)


def unreachable(url: str, exc: httpx.TransportError) -> StoreUnavailable:
    return StoreUnavailable(f"memsdk server at {url} cannot be reached: {type(exc).__name__}: {exc}")


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}



