"""The audit history read back: records rebuilt from their events, and the rules events obey.

Every change the bank makes is an event carrying the visible text before and after it, the
version it produced and when (`transition._Planner.event`). That is enough to rebuild any
memory at any version without keeping old copies of records, which is how
`MemoryBank.as_of` returns a scope as it stood at an earlier event or time, and how
`history_violations` tells a state the runtime produced from one it never could.

All functions are pure: events and records in, records or messages out.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime

from memsdk.errors import InvalidInput
from memsdk.types import EventType, HistoryEvent, MemoryRecord, Scope, content_hash

__all__ = ["next_version", "versions", "replay", "events_until", "history_violations"]


def _added(event: HistoryEvent, current: MemoryRecord | None) -> MemoryRecord:
    """Version 1 of a memory, from its ADD event; metadata, source turns, speaker, the time it
    happened and its context's hash come from ``current`` because events do not carry them."""
    text = event.after or (current.text if current else "")
    return MemoryRecord(
        id=event.memory_id, text=text, scope=event.scope, created_at=event.at, updated_at=event.at, version=event.version,
        source_turn_ids=current.source_turn_ids if current else (), metadata=current.metadata if current else {},
        content_hash=content_hash(text), tier=event.tier,
        speaker=current.speaker if current else None, occurred_at=current.occurred_at if current else None,
        context_hash=current.context_hash if current else None,
    )


def next_version(prev: MemoryRecord | None, event: HistoryEvent, current: MemoryRecord | None = None) -> MemoryRecord:
    """The record as ``event`` leaves it, given the version before it (None before its ADD).

    ``current`` is the record as stored today, the only source of what events do not carry
    (metadata, source turns, speaker, ``occurred_at``, ``context_hash``). A DELETE keeps the text it hid, so a
    RESTORE without text brings it back. A SUPERSEDE carries the validity it set; a RESTORE
    undoes the delete when there is one, else the supersession (as `plan_restore` does).
    """
    if event.event is EventType.ADD or prev is None:
        return _added(event, current)
    text = event.after if event.after is not None else prev.text
    change: dict[str, object] = dict(text=text, content_hash=content_hash(text), version=event.version, updated_at=event.at)
    if event.event is EventType.SUPERSEDE:
        change.update(invalid_at=event.invalid_at, superseded_by=event.superseded_by)
    elif event.event is EventType.RESTORE and not prev.deleted:  # a restore of a superseded record
        change.update(invalid_at=None, superseded_by=None)
    else:  # UPDATE keeps a deleted flag off, DELETE sets it, a RESTORE of a deleted record clears it
        deleted = event.event is EventType.DELETE
        change.update(deleted=deleted, deleted_at=event.at if deleted else None)
    return prev.model_copy(update=change)


def versions(events: Iterable[HistoryEvent], current: Mapping[uuid.UUID, MemoryRecord] | None = None) -> Iterator[MemoryRecord]:
    """Each event's record, version by version, in the events' order: one memory's history
    yields its versions, a scope's interleaves those of its memories. ``current`` maps ids
    to records as stored today (see `next_version`)."""
    current = current or {}
    latest: dict[uuid.UUID, MemoryRecord] = {}
    for e in events:
        latest[e.memory_id] = next_version(latest.get(e.memory_id), e, current.get(e.memory_id))
        yield latest[e.memory_id]


def replay(events: Iterable[HistoryEvent], current: Mapping[uuid.UUID, MemoryRecord] | None = None) -> list[MemoryRecord]:
    """The records as ``events`` leave them (deleted ones included), in order of first event."""
    return list({r.id: r for r in versions(events, current)}.values())


def events_until(events: Iterable[HistoryEvent], when: datetime | uuid.UUID, *, inclusive: bool = True) -> list[HistoryEvent]:
    """The events up to ``when``: a time (events stamped at or before it) or the id of one of
    ``events`` (it and those before it in ``seq`` order). ``inclusive=False`` stops just
    before: events stamped strictly earlier, or strictly before that event."""
    events = list(events)
    if isinstance(when, uuid.UUID):
        cut = next((e.seq for e in events if e.id == when), None)
        if cut is None:
            raise InvalidInput("when", f"{when} is no history event of this scope")
        return [e for e in events if e.seq < cut or (inclusive and e.seq == cut)]
    return [e for e in events if e.at < when or (inclusive and e.at == when)]


def _visible(record: MemoryRecord) -> str | None:
    """The text an event shows for a record: None while it is deleted."""
    return None if record.deleted else record.text


def _memory_violations(record: MemoryRecord, events: Sequence[HistoryEvent]) -> list[str]:
    """What is wrong with one memory's history (in ``seq`` order) as an explanation of ``record``."""
    name = f"memory {record.id}"
    if not events:
        return [f"{name} has no history"]
    if events[0].event is not EventType.ADD or events[0].version != 1 or events[0].before is not None:
        return [f"{name}: history starts with {events[0].event} v{events[0].version}, not ADD v1"]
    rebuilt = list(versions(events, {record.id: record}))
    problems = [
        f"{name}: {e.event} v{e.version} shows {e.after!r}, but leaves {_visible(made)!r} visible"
        for e, made in zip(events, rebuilt) if e.after != _visible(made)
    ]
    for prev, made, e in zip(events, rebuilt, events[1:]):
        if e.version != prev.version + 1:
            problems.append(f"{name}: version {prev.version} -> {e.version}")
        if e.event is EventType.ADD:
            problems.append(f"{name}: a second ADD at v{e.version}")
        if e.before != _visible(made):
            problems.append(f"{name}: {e.event} v{e.version} starts from {e.before!r}, the history left {_visible(made)!r}")
    last = rebuilt[-1]
    if last.version != record.version:
        problems.append(f"{name}: record at v{record.version}, history ends at v{last.version}")
    if last.deleted != record.deleted or (not record.deleted and last.text != record.text):
        problems.append(f"{name}: record text/deleted flag differ from what its history leaves")
    if (last.invalid_at, last.superseded_by) != (record.invalid_at, record.superseded_by):
        problems.append(f"{name}: record validity differs from what its history leaves")
    return problems


def history_violations(scope: Scope, records: Iterable[MemoryRecord], events: Iterable[HistoryEvent]) -> list[str]:
    """Why ``records`` and ``events`` could not have been produced in ``scope`` by
    `MemoryBank.apply` / `restore`; [] if they could.

    Each record's history must start with an ADD at version 1, every later event must raise
    the version by exactly one, each event's ``before`` must be the text the previous event
    left visible (None while deleted) and its ``after`` the text it leaves, and replaying
    the history must end at the record's version, text and deleted flag. Every event must
    belong to ``scope`` and to one of ``records``. A reward computed on a state with
    violations would train on a state the runtime can never reach.
    """
    events = sorted(events, key=lambda e: e.seq)
    problems = [f"event {e.id} belongs to {e.scope}, not {scope}" for e in events if e.scope != scope]
    by_memory: dict[uuid.UUID, list[HistoryEvent]] = defaultdict(list)
    for e in events:
        by_memory[e.memory_id].append(e)
    by_id = {r.id: r for r in records}
    problems += [f"history of memory {orphan} without a record" for orphan in by_memory.keys() - by_id.keys()]
    for record in by_id.values():
        problems += _memory_violations(record, by_memory.get(record.id, []))
    return problems
