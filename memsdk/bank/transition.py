"""T(M, ops): the one transition function of the memory bank.

Runtime ingest, the training environment and the evaluation harness all change memory
through `plan` (ops from a policy or the API) and `plan_restore`; `MemoryBank` only reads
the records a plan needs and writes what it returns, in one store operation. Planning is
pure: no I/O, no clock, no randomness beyond the injected ``new_id``, so it is tested
directly and a rejected batch has provably written nothing.

Semantics, per op, applied in order against the state left by the previous ops:

- ADD     a new record (version 1) holding ``text``.
- UPDATE  the target's text is replaced, metadata merged, source turns appended,
          version + 1. The previous text stays in the ADD/UPDATE event history.
          An UPDATE to the identical text changes nothing and records nothing.
- DELETE  soft delete: ``deleted=True``, version + 1; `plan_restore` undoes it.
- NOOP    nothing changes and nothing is recorded.
- RETIRE  the target stops being true: ``invalid_at`` (the replacing memory's
          ``valid_from``, else now) and ``superseded_by`` (``by``), version + 1, a SUPERSEDE
          event; the text stays, findable as history. An ADD's ``supersedes`` retires each
          memory it names the same way, by the new one. `plan_restore` reinstates it.

Tier rules (`memsdk.types.Tier`), checked here so no caller can get around them:

- episodic  added only by the ingest loop or the API; never rewritten (a turn is what was
            said); deleted only by the API or an explicit forget (role ``forget``), never by
            a policy such as the manager.
- core      at most one live record per scope: an ADD when one exists is a `Conflict`
            (rewrite it with UPDATE); its text is bounded by ``max_core_chars``.

A target that is not in the caller's scope is reported as not found; a target that is
deleted cannot be updated or deleted again (restore it first); a target that is no longer
at the op's ``expected_version`` is a `Conflict` (optimistic concurrency: the op was decided
on a text that another writer has changed since).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memsdk.errors import Conflict, InvalidInput, MemoryNotFound
from memsdk.types import (
    Actor,
    EventType,
    HistoryEvent,
    MemoryRecord,
    Op,
    OpType,
    Scope,
    Tier,
    content_hash,
)

__all__ = ["BankLimits", "Change", "Transition", "plan", "plan_restore", "check_limits", "EPISODIC_WRITERS", "FORGETTERS"]

#: actor roles that may add an episodic turn, and that may delete one
EPISODIC_WRITERS = frozenset({"ingest", "api"})
FORGETTERS = frozenset({"forget", "api"})


@dataclass(frozen=True, slots=True)
class BankLimits:
    """Size limits checked before anything is written."""

    max_text_chars: int = 4000
    max_ops_per_batch: int = 256
    max_metadata_bytes: int = 16_384
    max_search_limit: int = 1000
    max_core_chars: int = 2000  # ~500 tokens: the core summary rides in every answer prompt


@dataclass(frozen=True, slots=True)
class Change:
    """What one op did: the record before and after it, and the history event it wrote."""

    index: int
    op: OpType | None  # None for a restore, which no policy can ask for
    before: MemoryRecord | None
    after: MemoryRecord | None
    event: HistoryEvent | None

    @property
    def changed(self) -> bool:
        return self.event is not None


@dataclass(frozen=True, slots=True)
class Transition:
    batch_id: uuid.UUID
    changes: tuple[Change, ...]

    @property
    def records(self) -> list[MemoryRecord]:
        """The final state of every record the batch touched (one per id)."""
        final: dict[uuid.UUID, MemoryRecord] = {}
        for c in self.changes:
            if c.changed and c.after is not None:
                final[c.after.id] = c.after
        return list(final.values())

    @property
    def events(self) -> list[HistoryEvent]:
        """The history events the ops wrote, in order (an op that changed nothing writes none)."""
        return [c.event for c in self.changes if c.event is not None]

    @property
    def deleted_turns(self) -> list[MemoryRecord]:
        """The episodic turns the batch deleted (a forget, a correction, an API delete), as they were."""
        return [c.before for c in self.changes if c.op is OpType.DELETE and c.changed and c.before is not None and c.before.tier is Tier.EPISODIC]


def check_limits(i: int, op: Op, limits: BankLimits) -> None:
    """`InvalidInput` naming ``ops[i].<field>`` when ``op`` is over one of ``limits``' sizes
    (what `plan` checks of every op; the client checks a turn's episodic record with it too)."""
    for name in ("text", "context"):
        if (value := getattr(op, name)) is not None and len(value) > limits.max_text_chars:
            raise InvalidInput(f"ops[{i}].{name}", f"is {len(value)} characters, the limit is {limits.max_text_chars}")
    size = len(json.dumps(op.metadata, ensure_ascii=False).encode())
    if size > limits.max_metadata_bytes:
        raise InvalidInput(f"ops[{i}].metadata", f"is {size} bytes as JSON, the limit is {limits.max_metadata_bytes}")


class _Planner:
    """Carries the per-batch context so each op kind is a short method."""

    def __init__(self, state: dict[uuid.UUID, MemoryRecord], scope: Scope, actor: Actor, now: datetime, seq: int, new_id: Callable[[], uuid.UUID], limits: BankLimits = BankLimits()):
        self.state, self.scope, self.actor, self.now, self.limits = state, scope, actor, now, limits
        self.seq, self.new_id = seq, new_id
        self.batch_id = new_id()

    def event(self, kind: EventType, before: MemoryRecord | None, after: MemoryRecord) -> HistoryEvent:
        """A history entry; ``before``/``after`` are the visible texts (None while deleted)."""
        self.seq += 1
        return HistoryEvent(
            invalid_at=after.invalid_at if kind is EventType.SUPERSEDE else None,
            superseded_by=after.superseded_by if kind is EventType.SUPERSEDE else None,
            tier=after.tier,
            id=self.new_id(),
            memory_id=after.id,
            scope=self.scope,
            event=kind,
            before=None if before is None or before.deleted else before.text,
            after=None if after.deleted else after.text,
            version=after.version,
            actor=self.actor,
            at=self.now,
            batch_id=self.batch_id,
            seq=self.seq,
        )

    def live_target(self, i: int, op: Op) -> MemoryRecord:
        assert op.target is not None  # Op's validator guarantees it for UPDATE/DELETE
        record = self.state.get(op.target)
        if record is None:
            raise MemoryNotFound(op.target, field=f"ops[{i}].target")
        if record.deleted:
            raise Conflict(f"ops[{i}].target", f"memory {op.target} is deleted; restore it before {op.op}")
        if op.expected_version is not None and record.version != op.expected_version:
            raise Conflict(f"ops[{i}].target", f"memory {op.target} is at version {record.version}, the op was decided on version {op.expected_version}")
        return record

    def check_tier(self, i: int, op: Op, target: MemoryRecord | None) -> None:
        tier = op.tier if target is None else target.tier
        role = self.actor.role
        if tier is Tier.EPISODIC:
            if op.op is OpType.ADD and role not in EPISODIC_WRITERS:
                raise InvalidInput(f"ops[{i}].tier", f"only the ingest loop or the API adds episodic turns, not {role!r}")
            if op.op is OpType.UPDATE:
                raise InvalidInput(f"ops[{i}].target", f"memory {op.target} is an episodic turn, kept verbatim; it cannot be rewritten")
            if op.op in (OpType.DELETE, OpType.RETIRE) and role not in FORGETTERS:
                raise InvalidInput(f"ops[{i}].target", f"memory {op.target} is an episodic turn; only an explicit forget {op.op.lower()}s it, not {role!r}")
        if tier is Tier.CORE:
            if op.op is OpType.RETIRE:
                raise InvalidInput(f"ops[{i}].target", f"memory {op.target} is the core summary; rewrite it with UPDATE, it is never retired")
            if op.text is not None and len(op.text) > self.limits.max_core_chars:
                raise InvalidInput(f"ops[{i}].text", f"a core memory holds at most {self.limits.max_core_chars} characters, got {len(op.text)}")
            if op.op is OpType.ADD and (live := next((r for r in self.state.values() if r.tier is Tier.CORE and not r.deleted), None)):
                raise Conflict(f"ops[{i}].tier", f"this scope has a core memory ({live.id}); rewrite it with UPDATE")

    def add(self, i: int, op: Op) -> Change:
        assert op.text is not None
        self.check_tier(i, op, None)
        record = MemoryRecord(
            id=self.new_id(),
            text=op.text,
            scope=self.scope,
            created_at=self.now,
            updated_at=self.now,
            version=1,
            source_turn_ids=op.source_turn_ids,
            metadata=op.metadata,
            content_hash=content_hash(op.text),
            tier=op.tier,
            speaker=op.speaker,
            occurred_at=op.occurred_at,
            context_hash=content_hash(op.context) if op.context else None,
        )
        return Change(i, op.op, None, record, self.event(EventType.ADD, None, record))

    def retire(self, i: int, op: Op, by: MemoryRecord | None = None) -> Change:
        """The target, no longer true from ``by``'s ``valid_from`` (now without a successor)."""
        before = self.live_target(i, op)
        self.check_tier(i, op, before)
        if before.superseded:
            raise Conflict(f"ops[{i}].target", f"memory {op.target} is superseded already; restore it before {op.op}")
        if by is None and op.by is not None:
            by = self.state.get(op.by)
            if by is None:
                raise MemoryNotFound(op.by, field=f"ops[{i}].by")
        # a successor said to be true before what it replaced (a backfill, a clock skew)
        # must not make the old memory end before it began
        until = max(by.valid_from, before.valid_from) if by is not None else self.now
        after = before.model_copy(update=dict(invalid_at=until, superseded_by=by.id if by else None, updated_at=self.now, version=before.version + 1))
        return Change(i, op.op, before, after, self.event(EventType.SUPERSEDE, before, after))

    def update(self, i: int, op: Op) -> Change:
        assert op.text is not None
        before = self.live_target(i, op)
        self.check_tier(i, op, before)
        if op.text == before.text and not op.metadata and set(op.source_turn_ids) <= set(before.source_turn_ids):
            return Change(i, op.op, before, before, None)
        turns = before.source_turn_ids + tuple(t for t in op.source_turn_ids if t not in before.source_turn_ids)
        after = before.model_copy(
            update=dict(
                text=op.text,
                updated_at=self.now,
                version=before.version + 1,
                source_turn_ids=turns,
                metadata={**before.metadata, **op.metadata},
                content_hash=content_hash(op.text),
            )
        )
        return Change(i, op.op, before, after, self.event(EventType.UPDATE, before, after))

    def delete(self, i: int, op: Op) -> Change:
        before = self.live_target(i, op)
        self.check_tier(i, op, before)
        after = before.model_copy(update=dict(deleted=True, deleted_at=self.now, updated_at=self.now, version=before.version + 1))
        return Change(i, op.op, before, after, self.event(EventType.DELETE, before, after))

    def noop(self, i: int, op: Op) -> Change:
        before = None
        if op.target is not None:
            before = self.state.get(op.target)
            if before is None:
                raise MemoryNotFound(op.target, field=f"ops[{i}].target")
        return Change(i, op.op, before, before, None)


def plan(
    state: Mapping[uuid.UUID, MemoryRecord],
    ops: Sequence[Op],
    *,
    scope: Scope,
    actor: Actor,
    now: datetime,
    seq: int,
    limits: BankLimits = BankLimits(),
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> Transition:
    """Plan a batch. ``state`` holds at least every record the ops target, all in ``scope``,
    and the scope's live core record when an op adds one.

    Raises (and so writes nothing) on the first invalid op. ``seq`` is the last history
    sequence number used; events get ``seq + 1, seq + 2, ...``.
    """
    if len(ops) > limits.max_ops_per_batch:
        raise InvalidInput("ops", f"{len(ops)} ops in one batch, the limit is {limits.max_ops_per_batch}")
    for i, op in enumerate(ops):
        if not isinstance(op, Op):
            raise InvalidInput(f"ops[{i}]", f"expected an Op, got {type(op).__name__}")
        check_limits(i, op, limits)
    planner = _Planner(dict(state), scope, actor, now, seq, new_id, limits)
    handlers = {OpType.ADD: planner.add, OpType.UPDATE: planner.update, OpType.DELETE: planner.delete, OpType.NOOP: planner.noop, OpType.RETIRE: planner.retire}
    changes = []
    for i, op in enumerate(ops):
        done = [handlers[op.op](i, op)]
        # an ADD that supersedes: each replaced memory retired by it, recorded as a RETIRE of this op
        done += [planner.retire(i, Op.retire(old), by=done[0].after) for old in op.supersedes]
        for change in done:
            if change.after is not None:
                planner.state[change.after.id] = change.after
        changes += done
    return Transition(planner.batch_id, tuple(changes))


def plan_restore(
    record: MemoryRecord,
    *,
    actor: Actor,
    now: datetime,
    seq: int,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    live_core: MemoryRecord | None = None,
) -> Transition:
    """Undo a soft delete, else a supersession (the record is current again). Restoring a
    current record is a conflict, not a silent success, and so is restoring a core memory
    while the scope has another live one (``live_core``)."""
    if record.current:
        raise Conflict("memory_id", f"memory {record.id} is neither deleted nor superseded")
    if record.tier is Tier.CORE and live_core is not None and record.deleted:
        raise Conflict("memory_id", f"this scope has a core memory ({live_core.id}); delete it before restoring this one")
    planner = _Planner({}, record.scope, actor, now, seq, new_id)
    undo = dict(deleted=False, deleted_at=None) if record.deleted else dict(invalid_at=None, superseded_by=None)
    after = record.model_copy(update=dict(**undo, updated_at=now, version=record.version + 1))
    return Transition(planner.batch_id, (Change(0, None, record, after, planner.event(EventType.RESTORE, record, after)),))
