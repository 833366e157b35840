"""What callers pass the bank, checked: each ``as_*`` turns an argument into the value the
bank works with, or raises `InvalidInput` naming the argument (`ScopeRequired` for a
missing scope)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from memsdk.errors import InvalidInput, ScopeRequired
from memsdk.types import Op, Scope, Tier, check_text

__all__ = ["ScopeLike", "as_scope", "scope_of_key", "as_memory_id", "as_moment", "as_count", "as_tier", "as_query", "as_shown", "as_ops"]

ScopeLike = Scope | dict[str, Any]


def as_scope(value: object, field: str = "scope") -> Scope:
    """Validate a scope given as a `Scope` or a dict (any other value is `InvalidInput`: apps
    pass what they were given); errors name the field."""
    if isinstance(value, Scope):
        return value
    if value is None or value == {}:
        raise ScopeRequired(field)
    if not isinstance(value, dict):
        raise InvalidInput(field, f"expected a Scope or a dict, got {type(value).__name__}")
    try:
        return Scope.model_validate(value)
    except ValidationError as exc:
        if any(e["type"] == "value_error" and not e["loc"] for e in exc.errors()):
            raise ScopeRequired(field) from None
        raise InvalidInput.from_pydantic(exc, field) from None


def scope_of_key(key: str) -> Scope:
    """The inverse of `Scope.key`."""
    return Scope(**dict(zip(("user_id", "agent_id", "run_id"), json.loads(key))))


def as_memory_id(value: uuid.UUID | str, field: str = "memory_id") -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not a memory id (a UUID)") from None


def as_moment(value: datetime | uuid.UUID, field: str = "when") -> datetime | uuid.UUID:
    """A point in a scope's history: a timezone-aware time, or a history event's id."""
    if isinstance(value, datetime) and value.tzinfo is None:  # history times are UTC; a naive one would raise TypeError
        raise InvalidInput(field, "must be a timezone-aware datetime")
    if not isinstance(value, (datetime, uuid.UUID)):
        raise InvalidInput(field, f"expected a datetime or a history event id (UUID), got {type(value).__name__}")
    return value


def as_count(field: str, value: Any, *, low: int, high: int | None = None) -> int:
    """An integer argument (limit, offset) in [low, high]; anything else is `InvalidInput`.
    A negative offset or limit would slice from the end, silently returning the wrong records."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise InvalidInput(field, f"must be between {low} and {high}" if high is not None else f"must be at least {low}, got {value}")
    return value


def as_tier(value: Tier | str | None, field: str = "tier") -> str | None:
    """A tier name for a store filter (None: every tier); an unknown one is `InvalidInput`."""
    if value is None:
        return None
    try:
        return Tier(value).value
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not a tier; expected one of {[t.value for t in Tier]}") from None


def as_query(value: Any, field: str = "query") -> str:
    """A search query or question: text BM25 and the interaction log can encode."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a non-empty string, got {type(value).__name__}")
    try:
        return check_text(value)
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None


def as_shown(value: Any) -> list[tuple[str, str]]:
    """(header, words) pairs as `MemoryBank.shown_vectors` embeds them: words a query could
    be, a header too or "" (none)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInput("shown", f"must be a sequence of (header, words) pairs, got {type(value).__name__}")
    pairs = []
    for i, pair in enumerate(value):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidInput(f"shown[{i}]", "must be a (header, words) pair")
        head, words = pair
        pairs.append(("" if head == "" else as_query(head, f"shown[{i}][0]"), as_query(words, f"shown[{i}][1]")))
    return pairs


def as_ops(ops: Iterable[Op | dict[str, Any]]) -> list[Op]:
    if isinstance(ops, (Op, dict)) or not isinstance(ops, Iterable):
        raise InvalidInput("ops", f"expected a list of ops, got {type(ops).__name__}")
    out = []
    for i, op in enumerate(ops):
        if isinstance(op, Op):
            out.append(op)
            continue
        try:
            out.append(Op.model_validate(op))
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, f"ops[{i}]") from None
    return out
