"""Records and history events <-> store points.

A memory and its audit events live side by side in one collection (events carry no
vector), so one upsert writes a batch's records *and* its history: one WAL entry in the
embedded engine, one request to a server. That is what makes a batch all-or-nothing and
keeps every change paired with its history record.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict, Unpack

import numpy as np

from memsdk.store.base import SCOPE_TIER_FIELD, Point, Sparse, Where, scope_tier_key
from memsdk.types import STORED, HistoryEvent, MemoryRecord, Scope

__all__ = ["record_point", "event_point", "decode_record", "decode_event", "memories", "events", "scope_points"]

_INTERNAL = ("kind", "scope_key", "state", SCOPE_TIER_FIELD)


class _Conditions(TypedDict, total=False):
    """The conditions `memories` and `events` add to the scope's (`Where`'s other fields)."""

    ids: frozenset[str] | None
    deleted: bool | None
    memory_id: str | None
    tier: str | None
    content_hashes: frozenset[str] | None
    context_hashes: frozenset[str] | None
    turn_ids: frozenset[str] | None


def memories(scope: Scope, **conditions: Unpack[_Conditions]) -> Where:
    return Where(scope_key=scope.key, kind="memory", **conditions)


def events(scope: Scope, **conditions: Unpack[_Conditions]) -> Where:
    return Where(scope_key=scope.key, kind="event", **conditions)


def scope_points(scope: Scope) -> Where:
    """Every record and event of a scope: what an erase deletes, in one operation."""
    return Where(scope_key=scope.key, kind=None)


def record_point(record: MemoryRecord, vector: np.ndarray | None, sparse: Sparse | None = None) -> Point:
    payload = record.model_dump(mode="json")
    # metadata as JSON text: the embedded engine reparses payload floats inexactly (one in five
    # random floats came back one ULP off, 6.45995876853461e+115 as 6.4599587685346095e+115)
    payload["metadata"] = json.dumps(payload["metadata"], ensure_ascii=False)
    payload.update(kind="memory", scope_key=record.scope.key, state="deleted" if record.deleted else "live")
    payload[SCOPE_TIER_FIELD] = scope_tier_key(record.scope.key, payload["tier"])
    return Point(str(record.id), payload, vector, sparse)


def event_point(event: HistoryEvent) -> Point:
    payload = event.model_dump(mode="json")
    payload.update(kind="event", scope_key=event.scope.key)
    return Point(str(event.id), payload, None)


def _fields(point: Point) -> dict[str, Any]:
    fields = {k: v for k, v in point.payload.items() if k not in _INTERNAL}
    if isinstance(metadata := fields.get("metadata"), str):  # a store written before metadata was text holds an object
        # most memories have none: no parse for them (a retrieve decodes ~90 records)
        fields["metadata"] = {} if metadata == "{}" else json.loads(metadata)
    return fields


def decode_record(point: Point) -> MemoryRecord:
    return MemoryRecord.model_validate(_fields(point), context=STORED)


def decode_event(point: Point) -> HistoryEvent:
    return HistoryEvent.model_validate(_fields(point), context=STORED)
