"""What is true now: a memory replaced by a later one is retired (valid until, superseded by),
kept as history, exported, replayed and restorable; on every engine."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime

import pytest

from memsdk.bank import MemoryBank
from memsdk.errors import Conflict, InvalidInput, MemoryNotFound
from memsdk.types import Actor, EventType, Op, OpType, Scope, Tier

BOSTON_AT = datetime(2022, 3, 1, tzinfo=UTC)
AUSTIN_AT = datetime(2023, 9, 2, tzinfo=UTC)
MANAGER = Actor(role="manager", version="test")
FORGET = Actor(role="forget", version="test")


def _moved(bank: MemoryBank, scope: Scope) -> tuple[uuid.UUID, uuid.UUID]:
    """Boston, then Austin replacing it: the two ids."""
    old = bank.apply(scope, [Op.add("Maya lives in Boston", occurred_at=BOSTON_AT)], actor=MANAGER).records[0]
    t = bank.apply(scope, [Op.add("Maya moved into a new place in Austin", occurred_at=AUSTIN_AT, supersedes=(old.id,))], actor=MANAGER)
    new = next(r for r in t.records if r.id != old.id)
    return old.id, new.id


def test_an_add_that_supersedes_retires_the_old_memory_as_of_the_new_ones_time(bank: MemoryBank, alice: Scope) -> None:
    old_id, new_id = _moved(bank, alice)
    old, new = bank.get(alice, old_id), bank.get(alice, new_id)
    assert (old.text, old.version, old.deleted) == ("Maya lives in Boston", 2, False)  # kept, not deleted
    assert (old.invalid_at, old.superseded_by, old.current, old.valid_from) == (AUSTIN_AT, new_id, False, BOSTON_AT)
    assert new.current and new.valid_from == AUSTIN_AT and new.invalid_at is None
    retired = bank.history(alice, old_id)[-1]
    assert (retired.event, retired.before, retired.after, retired.invalid_at, retired.superseded_by, retired.actor) == (
        EventType.SUPERSEDE, "Maya lives in Boston", "Maya lives in Boston", AUSTIN_AT, new_id, MANAGER)
    # history questions still find it
    assert old_id in {h.record.id for h in bank.search(alice, "Boston", limit=5)}
    assert bank.snapshot(alice).violations() == []


def test_restore_reinstates_a_superseded_memory(bank: MemoryBank, alice: Scope) -> None:
    old_id, _ = _moved(bank, alice)
    back = bank.restore(alice, old_id)
    assert back.current and back.version == 3 and back.superseded_by is None
    assert bank.history(alice, old_id)[-1].event is EventType.RESTORE
    with pytest.raises(Conflict, match="neither deleted nor superseded"):
        bank.restore(alice, old_id)
    assert bank.snapshot(alice).violations() == []


def test_a_deleted_superseded_memory_restores_to_superseded(bank: MemoryBank, alice: Scope) -> None:
    old_id, new_id = _moved(bank, alice)
    bank.apply(alice, [Op.delete(old_id)])
    back = bank.restore(alice, old_id)
    assert (back.deleted, back.superseded_by) == (False, new_id)  # the delete is undone, the replacement stands


def test_as_of_shows_what_was_current_then(bank: MemoryBank, alice: Scope) -> None:
    old_id, _ = _moved(bank, alice)
    add_event = bank.history(alice, old_id)[0]
    then = {r.id: r for r in bank.as_of(alice, add_event.id).records()}
    assert then[old_id].current
    now = {r.id: r for r in bank.as_of(alice, bank.history(alice)[-1].id).records()}
    assert now[old_id].invalid_at == AUSTIN_AT


def test_export_import_keeps_validity_exactly(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    old_id, new_id = _moved(bank, alice)
    out = io.StringIO()
    bank.export(alice, out)
    bank.import_(io.StringIO(out.getvalue()), scope=bob)
    copied = {r.text: r for r in bank.list(bob)}
    assert copied["Maya lives in Boston"].invalid_at == AUSTIN_AT
    assert copied["Maya lives in Boston"].superseded_by == copied["Maya moved into a new place in Austin"].id  # ids renewed together
    # a file claiming a validity its history does not explain is refused, nothing written
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    for line in lines:
        if line.get("type") == "memory" and line["record"]["id"] == str(new_id):
            line["record"]["invalid_at"] = AUSTIN_AT.isoformat()
    with pytest.raises(InvalidInput, match="invalid_at"):
        bank.import_(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)), scope=Scope(user_id="carol"))
    assert bank.list(Scope(user_id="carol")) == []


def test_retire_rules(bank: MemoryBank, alice: Scope) -> None:
    turn = bank.apply(alice, [Op.add("I live in Boston", tier=Tier.EPISODIC)], actor=Actor(role="ingest")).records[0]
    fix = bank.apply(alice, [Op.add("sorry, Cambridge, not Boston", tier=Tier.EPISODIC)], actor=Actor(role="ingest")).records[0]
    # a policy never retires a turn; an explicit forget (a correction) does
    with pytest.raises(InvalidInput, match="episodic"):
        bank.apply(alice, [Op.retire(turn.id, by=fix.id)], actor=MANAGER)
    retired = bank.apply(alice, [Op.retire(turn.id, by=fix.id)], actor=FORGET).records[0]
    assert (retired.superseded_by, retired.invalid_at) == (fix.id, fix.valid_from)
    with pytest.raises(Conflict, match="superseded already"):
        bank.apply(alice, [Op.retire(turn.id)], actor=FORGET)
    core = bank.apply(alice, [Op.add("Maya, teacher", tier=Tier.CORE)]).records[0]
    with pytest.raises(InvalidInput, match="core"):
        bank.apply(alice, [Op.retire(core.id)])
    fact = bank.apply(alice, [Op.add("Likes tea")]).records[0]
    bank.apply(alice, [Op.delete(fact.id)])
    with pytest.raises(Conflict, match="deleted"):
        bank.apply(alice, [Op.retire(fact.id)])


def test_a_supersedes_outside_the_scope_writes_nothing(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    theirs = bank.apply(bob, [Op.add("Bob lives in Boston")]).records[0]
    with pytest.raises(MemoryNotFound):
        bank.apply(alice, [Op.add("Lives in Austin", supersedes=(theirs.id,))])
    assert bank.list(alice) == [] and bank.get(bob, theirs.id).current


def test_op_shapes_for_validity() -> None:
    some = uuid.uuid4()
    with pytest.raises(ValueError, match="supersedes"):
        Op.update(some, "x", supersedes=(uuid.uuid4(),))
    with pytest.raises(ValueError, match="by"):
        Op.add("x", by=some)
    with pytest.raises(ValueError, match="itself"):
        Op.retire(some, by=some)
    with pytest.raises(ValueError, match="twice"):
        Op.add("x", supersedes=(some, some))
    assert Op.retire(some).op is OpType.RETIRE


def test_render_marks_a_superseded_memory_with_its_end(bank: MemoryBank, alice: Scope) -> None:
    old_id, new_id = _moved(bank, alice)
    assert bank.get(alice, old_id).render() == "Maya lives in Boston (until 2 September 2023)"
    assert bank.get(alice, new_id).render() == "Maya moved into a new place in Austin"
    assert "until" not in bank.get(alice, old_id).index_text()  # the index holds what was said
