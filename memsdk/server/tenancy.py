"""A tenant's scopes inside the one bank a server owns.

A request names a scope as the embedded client does (``{"user_id": "bob"}``); the server
binds it to the key's tenant by prefixing every id it names with ``<tenant>/`` before any
call, and strips the prefix from every scope it returns. ``bob`` of tenant A and ``bob`` of
tenant B are therefore two partitions of the store, and since a tenant's name holds no
"/", no id a request can write (``"B/bob"`` included: it becomes ``"A/B/bob"``) reaches
another tenant's. Ids of memories and answers are checked against the scope they belong to
by the client itself (`MemoryNotFound`, the same reply as for an id that does not exist).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memsdk.errors import InvalidInput, ScopeRequired
from memsdk.types import Scope

__all__ = ["bind", "unbind", "public", "public_line", "bound_line", "SCOPE_FIELDS"]

SCOPE_FIELDS = ("user_id", "agent_id", "run_id")


def bind(tenant: str, scope: Mapping[str, Any] | Scope | None, field: str = "scope") -> Scope:
    """``scope`` as the store holds it for ``tenant``: `ScopeRequired` when it names no id,
    `InvalidInput` naming ``field`` when it names one of the wrong type."""
    if scope is None:
        raise ScopeRequired(field)
    raw = scope.model_dump() if isinstance(scope, Scope) else scope
    if not isinstance(raw, Mapping):
        raise InvalidInput(field, "must be an object with user_id, agent_id and/or run_id")
    extra = set(raw) - set(SCOPE_FIELDS)
    if extra:
        raise InvalidInput(f"{field}.{sorted(extra)[0]}", "is not a scope field (user_id, agent_id, run_id)")
    ids: dict[str, str] = {}
    for name in SCOPE_FIELDS:
        value = raw.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"{field}.{name}", "must be a non-empty string")
        ids[name] = f"{tenant}/{value}"
    if not ids:
        raise ScopeRequired(field)
    try:
        return Scope(**ids)
    except ValueError as exc:
        raise InvalidInput(field, str(exc).splitlines()[-1].strip()) from None


def unbind(tenant: str, scope: Mapping[str, Any]) -> dict[str, Any]:
    """A stored scope (as JSON) as its tenant named it."""
    prefix = f"{tenant}/"
    return {k: (v[len(prefix):] if isinstance(v, str) and v.startswith(prefix) else v) for k, v in scope.items()}


def public(tenant: str, value: Any) -> Any:
    """JSON ``value`` (a dumped result) with every ``scope`` object in it unbound."""
    if isinstance(value, list):
        return [public(tenant, v) for v in value]
    if isinstance(value, dict):
        return {k: (unbind(tenant, v) if k == "scope" and isinstance(v, dict) else public(tenant, v)) for k, v in value.items()}
    return value


def public_line(tenant: str, line: str) -> str:
    """One line of an export, its scopes unbound."""
    return json.dumps(public(tenant, json.loads(line)), ensure_ascii=False)


def bound_line(tenant: str, line: str, n: int) -> str:
    """One line of an import, its scopes bound to ``tenant`` (whatever they named)."""
    try:
        data = json.loads(line)
    except ValueError:
        raise InvalidInput(f"line {n}", "is not JSON") from None

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: (bind(tenant, v, f"line {n}.scope").model_dump(mode="json") if k == "scope" and isinstance(v, dict) else walk(v)) for k, v in value.items()}
        return value

    return json.dumps(walk(data), ensure_ascii=False)
