"""What a request names, checked before any route acts on it: who is asking (the key's
tenant), whose memory (a scope, bound into that tenant), which turns; and how much it may
send (`ServerLimits`, re-exported). Every route module shares these."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memsdk.errors import InvalidInput
from memsdk.server.keys import KEY_REQUIRED, Keyring, Tenant
from memsdk.server.limits import ServerLimits
from memsdk.server.problems import HTTPProblem
from memsdk.server.tenancy import bind
from memsdk.types import Scope, Turn

__all__ = [
    "ServerLimits", "JSONBody", "ScopeIn", "IngestIn", "Who", "Admin", "QueryScope", "BEARER", "tenant", "scoped", "as_turn", "in_tenant",
]  # fmt: skip

#: the challenge a 401 carries
BEARER = {"WWW-Authenticate": "Bearer"}


class JSONBody(BaseModel):
    """A request body: a field it does not know is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class ScopeIn(JSONBody):
    """Whose memory, as the app names it; the server binds it to the key's tenant."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class IngestIn(JSONBody):
    scope: ScopeIn
    turn: dict[str, Any] | None = Field(None, description="One turn: speaker, text, timestamp, turn_id (the client's Turn).")
    turns: list[dict[str, Any]] | None = Field(None, description="Several turns, ingested in order.")


def tenant(request: Request) -> Tenant:
    """The tenant of the request's key (`Keyring.tenant_of`), else 401."""
    keys: Keyring = request.app.state.keys
    found = keys.tenant_of(request.headers.get("authorization"))
    if found is None:
        raise HTTPProblem(401, "Unauthorized", KEY_REQUIRED, headers=BEARER)
    return found


def _admin(who: Annotated[Tenant, Depends(tenant)]) -> Tenant:
    if not who.admin:
        raise HTTPProblem(403, "Forbidden", "switching policies needs an admin key")
    return who


def _query_scope(user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, str | None]:
    """A scope named in the query string (GET and DELETE have no body)."""
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


Who = Annotated[Tenant, Depends(tenant)]
Admin = Annotated[Tenant, Depends(_admin)]
QueryScope = Annotated[dict[str, str | None], Depends(_query_scope)]


def scoped(who: Tenant, scope: ScopeIn | dict[str, Any] | None, field: str = "scope") -> Scope:
    """The scope a request named, as the store holds it for ``who``'s tenant."""
    raw = scope.model_dump() if isinstance(scope, ScopeIn) else scope
    return bind(who.name, None if raw is None else {k: v for k, v in raw.items() if v is not None}, field)


def as_turn(raw: dict[str, Any], field: str) -> Turn:
    """A turn as the request sent it, or `InvalidInput` naming its field (``turns[2].speaker``)."""
    try:
        return Turn.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc, field) from None


def in_tenant(tenant: str, scope_key: str) -> bool:
    """Whether a stored scope (its `Scope.key`) is one of ``tenant``'s: every id it names is."""
    try:
        ids = json.loads(scope_key)
    except ValueError:
        return False
    return isinstance(ids, list) and any(ids) and all(i is None or (isinstance(i, str) and i.startswith(f"{tenant}/")) for i in ids)
