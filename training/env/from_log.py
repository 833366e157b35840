"""Manager-training states from a client's interaction log (logged app traffic + feedback).

The Memory-R1 recipe applied to production traffic: for every logged ingest, the state is
the scope's bank *as it was just before that ingest*, the facts the extractor took from
the turn, and the answered questions whose evidence includes a memory that ingest wrote,
judged by the gold answers users attached with ``client.feedback``.

"As it was" is rebuilt from the bank's own audit history (every change is an event with
its before/after text and version), so a state is exactly one the runtime produced, never
an approximation of it: `history_violations` holds for it by construction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime

from memsdk.bank import BankSnapshot, MemoryBank, codec
from memsdk.interactions import InteractionLog, Trajectory
from memsdk.types import EventType, HistoryEvent, MemoryRecord, Scope, Turn, content_hash

from .state import MemoryState, QAItem

__all__ = ["bank_before", "log_states"]


def _replay(events: list[HistoryEvent], current: dict[uuid.UUID, MemoryRecord]) -> list[MemoryRecord]:
    """Records as the events leave them. Metadata and source turns come from the current
    record (events do not carry them); text, version, deletion and times come from events."""
    state: dict[uuid.UUID, MemoryRecord] = {}
    for e in events:
        prev = state.get(e.memory_id)
        if e.event is EventType.ADD or prev is None:
            now = current.get(e.memory_id)
            text = e.after or (now.text if now else "")
            state[e.memory_id] = MemoryRecord(
                id=e.memory_id, text=text, scope=e.scope, created_at=e.at, updated_at=e.at, version=e.version,
                source_turn_ids=now.source_turn_ids if now else (), metadata=now.metadata if now else {},
                content_hash=content_hash(text), tier=e.tier,
                speaker=now.speaker if now else None, occurred_at=now.occurred_at if now else None,
            )
            continue
        text = e.after if e.after is not None else prev.text
        state[e.memory_id] = prev.model_copy(update=dict(
            text=text, content_hash=content_hash(text), version=e.version, updated_at=e.at,
            deleted=e.event is EventType.DELETE, deleted_at=e.at if e.event is EventType.DELETE else None,
        ))
    return list(state.values())


def bank_before(bank: MemoryBank, scope: Scope, moment: datetime) -> BankSnapshot:
    """The scope's bank as it stood just before ``moment``, rebuilt from its audit history."""
    events = [e for e in bank.history(scope) if e.at < moment]
    current = {r.id: r for r in bank.list(scope, include_deleted=True)}
    records = _replay(events, current)
    vectors = bank.embedder.embed([r.text for r in records]) if records else []
    points = [codec.record_point(r, v) for r, v in zip(records, vectors)] + [codec.event_point(e) for e in events]
    return BankSnapshot(scope, tuple(points), bank.embedder.dim)


def _linked_qa(answers: list[Trajectory], written: set[str]) -> tuple[QAItem, ...]:
    items = []
    for a in answers:
        golds = [f.gold for f in a.feedback if f.gold] or [a.output.get("answer") for f in a.feedback if f.correct]
        if golds and written & set(a.output.get("evidence", [])) and golds[-1]:
            items.append(QAItem(question=a.input["question"], answer=golds[-1]))
    return tuple(items)


def log_states(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> Iterator[MemoryState]:
    """One state per logged ingest that wrote memories later used as evidence for a judged answer."""
    trajectories = list(log.read(scope=scope))
    answers = [t for t in trajectories if t.kind == "answer" and t.feedback]
    for t in trajectories:
        if t.kind != "ingest" or not t.output.get("facts") or t.started_at is None:
            continue
        written = {str(op.memory_id) for op in t.ops if op.memory_id is not None and op.changed}
        written |= {t.output["episodic_id"]} if t.output.get("episodic_id") else set()  # answers cite the turn itself too
        qa = _linked_qa([a for a in answers if a.scope == t.scope and a.created_at > t.created_at], written)
        if not qa:
            continue
        yield MemoryState(
            key=f"log/{t.id}",
            bank=bank_before(bank, t.scope, t.started_at),
            facts=tuple(t.output["facts"]),
            qa=qa,
            turn=Turn.model_validate(t.input["turn"]),
        )
