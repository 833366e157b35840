"""The audit history read back: replay, the bank as of an event or a time, and the history's rules."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsdk.bank import MemoryBank, codec, history_violations, replay, versions
from memsdk.bank.history import events_until
from memsdk.embedding import HashEmbedder
from memsdk.errors import InvalidInput
from memsdk.types import API_ACTOR, EventType, HistoryEvent, MemoryRecord, Op, Scope, content_hash

from .conftest import DIM, Engine

ALICE = Scope(user_id="alice")
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
DOG_ID, TEA_ID = uuid.UUID(int=1), uuid.UUID(int=2)
BUDDY, SCOUT = "Has a dog named Buddy", "Has two dogs, Buddy and Scout"


def event(kind: EventType, before: str | None, after: str | None, version: int, seq: int, memory_id: uuid.UUID = DOG_ID) -> HistoryEvent:
    """A history event stamped ``seq`` minutes after T0, as the planner would write it."""
    return HistoryEvent(
        id=uuid.UUID(int=1000 + seq), memory_id=memory_id, scope=ALICE, event=kind, before=before, after=after,
        version=version, actor=API_ACTOR, at=T0 + timedelta(minutes=seq), batch_id=uuid.UUID(int=2000 + seq), seq=seq,
    )


DOG = [
    event(EventType.ADD, None, BUDDY, 1, seq=1),
    event(EventType.UPDATE, BUDDY, SCOUT, 2, seq=2),
    event(EventType.DELETE, SCOUT, None, 3, seq=3),
    event(EventType.RESTORE, None, SCOUT, 4, seq=4),
]
TEA = [event(EventType.ADD, None, "Likes tea", 1, seq=5, memory_id=TEA_ID)]


def stored(text: str, version: int, **fields: object) -> MemoryRecord:
    """The dog's record as stored today: what events do not carry (metadata, turns) comes from it."""
    return MemoryRecord(id=DOG_ID, text=text, scope=ALICE, created_at=T0, updated_at=T0, version=version, content_hash=content_hash(text), **fields)


# -- replay ---------------------------------------------------------------------------------


def test_versions_rebuild_one_memory_version_by_version() -> None:
    today = stored(SCOUT, 4, metadata={"source": "chat"}, source_turn_ids=("D1:1",), speaker="Caroline")
    rebuilt = list(versions(DOG, {DOG_ID: today}))
    assert [(r.text, r.version, r.deleted, r.updated_at) for r in rebuilt] == [
        (BUDDY, 1, False, T0 + timedelta(minutes=1)),
        (SCOUT, 2, False, T0 + timedelta(minutes=2)),
        (SCOUT, 3, True, T0 + timedelta(minutes=3)),  # a delete hides the text, it does not drop it
        (SCOUT, 4, False, T0 + timedelta(minutes=4)),
    ]
    assert [r.deleted_at for r in rebuilt] == [None, None, T0 + timedelta(minutes=3), None]
    for r in rebuilt:
        assert r.created_at == T0 + timedelta(minutes=1) and r.content_hash == content_hash(r.text)
        assert (r.metadata, r.source_turn_ids, r.speaker) == ({"source": "chat"}, ("D1:1",), "Caroline")


def test_replay_leaves_each_memory_of_a_scope_at_its_last_version() -> None:
    interleaved = sorted(DOG[:3] + TEA, key=lambda e: e.seq)
    assert [(r.id, r.text, r.version, r.deleted) for r in replay(interleaved)] == [(DOG_ID, SCOUT, 3, True), (TEA_ID, "Likes tea", 1, False)]
    assert replay([]) == []


def test_events_until_a_time_or_an_event() -> None:
    third = DOG[2]
    assert events_until(DOG, third.at) == DOG[:3]
    assert events_until(DOG, third.at, inclusive=False) == DOG[:2]
    assert events_until(DOG, third.id) == DOG[:3]
    assert events_until(DOG, third.id, inclusive=False) == DOG[:2]
    assert events_until(DOG, T0) == []
    with pytest.raises(InvalidInput, match="when"):
        events_until(DOG, TEA[0].id)


# -- the bank as of an event or a time ------------------------------------------------------


@pytest.fixture
def clocked(engine: Engine, tmp_path: Path) -> Iterator[tuple[MemoryBank, Callable[[int], None]]]:
    """A bank whose clock reads T0 + the minute last set, so each step has a known time."""
    minute = [0]
    bank = MemoryBank(engine.make(tmp_path), HashEmbedder(DIM), clock=lambda: T0 + timedelta(minutes=minute[0]))
    yield bank, lambda m: minute.__setitem__(0, m)
    bank.close()


def test_as_of_gives_the_scope_at_each_step_of_its_history(clocked: tuple[MemoryBank, Callable[[int], None]]) -> None:
    bank, at_minute = clocked
    at_minute(1)
    dog = bank.apply(ALICE, [Op.add(BUDDY, source_turn_ids=("D1:1",))]).records[0].id
    at_minute(2)
    bank.apply(ALICE, [Op.update(dog, SCOUT), Op.add("Likes tea")])
    at_minute(3)
    bank.apply(ALICE, [Op.delete(dog)])
    add, update, tea, delete = bank.history(ALICE)

    def seen(when: datetime | uuid.UUID, inclusive: bool = True) -> list[tuple[str, int, bool]]:
        snapshot = bank.as_of(ALICE, when, inclusive=inclusive)
        assert snapshot.violations() == []  # every step is a state apply itself produced
        return [(r.text, r.version, r.deleted) for r in snapshot.records(include_deleted=True)]

    after_add = [(BUDDY, 1, False)]
    after_update = [(SCOUT, 2, False), ("Likes tea", 1, False)]
    after_delete = [(SCOUT, 3, True), ("Likes tea", 1, False)]
    assert seen(add.id, inclusive=False) == []
    assert seen(add.id) == after_add
    assert seen(update.id) == [(SCOUT, 2, False)]  # the UPDATE before the ADD of the same batch
    assert seen(tea.id) == after_update
    assert seen(delete.id) == after_delete
    assert seen(delete.id, inclusive=False) == after_update

    assert seen(T0) == []
    assert seen(T0 + timedelta(minutes=1)) == after_add
    assert seen(T0 + timedelta(minutes=2), inclusive=False) == after_add  # a whole batch, or none of it
    assert seen(T0 + timedelta(minutes=2, seconds=30)) == after_update
    assert seen(T0 + timedelta(minutes=3)) == after_delete
    assert bank.as_of(ALICE, delete.id).records(include_deleted=True) == bank.list(ALICE, include_deleted=True)


def test_a_fork_of_an_earlier_state_searches_and_carries_on_from_it(clocked: tuple[MemoryBank, Callable[[int], None]]) -> None:
    bank, _ = clocked
    dog = bank.apply(ALICE, [Op.add(BUDDY)]).records[0].id
    bank.apply(ALICE, [Op.update(dog, SCOUT)])
    bank.apply(ALICE, [Op.delete(dog)])
    update = bank.history(ALICE)[1]

    fork = MemoryBank.from_snapshot(bank.as_of(ALICE, update.id), bank.embedder)
    assert fork.search(ALICE, "Scout", limit=1, hybrid=True)[0].record.text == SCOUT  # indexed as the bank indexes
    fork.apply(ALICE, [Op.update(dog, "Has three dogs", expected_version=2)])
    assert [e.event for e in fork.history(ALICE)] == [EventType.ADD, EventType.UPDATE, EventType.UPDATE]
    assert fork.snapshot(ALICE).violations() == []
    assert bank.get(ALICE, dog, include_deleted=True).deleted  # the bank itself is untouched


def test_as_of_refuses_what_is_no_point_of_this_scope(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    bank.apply(alice, [Op.add(BUDDY)])
    bank.apply(bob, [Op.add("Bob's secret")])
    bobs = bank.history(bob)[0].id
    with pytest.raises(InvalidInput, match="when"):
        bank.as_of(alice, bobs)  # another scope's event reads as no event at all
    with pytest.raises(InvalidInput, match="timezone-aware"):
        bank.as_of(alice, datetime(2023, 5, 8))
    with pytest.raises(InvalidInput, match="when"):
        bank.as_of(alice, str(bobs))  # type: ignore[arg-type]


# -- the history's rules ----------------------------------------------------------------------


def test_a_history_apply_wrote_has_no_violations() -> None:
    assert history_violations(ALICE, replay(DOG + TEA), DOG + TEA) == []


def swap(i: int, **fields: object) -> list[HistoryEvent]:
    """The dog's history with event ``i`` changed."""
    return [e.model_copy(update=fields) if j == i else e for j, e in enumerate(DOG)]


FORGED = {
    "no-history": ([], "has no history"),
    "starts-with-update": (DOG[1:], "history starts with UPDATE v2, not ADD v1"),
    "version-gap": (swap(2, version=5), "version 2 -> 5"),
    "second-add": (swap(1, event=EventType.ADD), "a second ADD at v2"),
    "before-not-left": (swap(1, before="Has a cat"), "starts from 'Has a cat'"),
    "delete-shows-text": (swap(2, after="Has no dogs"), "shows 'Has no dogs', but leaves None visible"),
    "ends-elsewhere": (DOG[:2], "record at v4, history ends at v2"),
    "other-scope": (swap(0, scope=Scope(user_id="bob")), "belongs to"),
    "orphan": (DOG + TEA, f"history of memory {TEA_ID} without a record"),
}


@pytest.mark.parametrize("events, problem", FORGED.values(), ids=FORGED.keys())
def test_history_violations_name_what_apply_could_not_have_written(events: list[HistoryEvent], problem: str) -> None:
    problems = history_violations(ALICE, [stored(SCOUT, 4)], events)
    assert any(problem in p for p in problems), problems


def test_a_record_written_around_apply_is_a_violation(bank: MemoryBank, alice: Scope) -> None:
    record = bank.apply(alice, [Op.add(BUDDY)]).records[0]
    assert bank.snapshot(alice).violations() == []

    forged = record.model_copy(update={"text": "Has no pets", "version": 2})
    bank.transport.upsert([codec.record_point(forged, bank.embedder.embed([forged.text])[0])])  # bypasses apply: no event

    assert any("history ends at v1" in p for p in bank.snapshot(alice).violations())
