"""The MemoryBank contract, run against every transport (see conftest.ENGINES)."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime

import numpy as np
import pytest

from memsdk.bank import MemoryBank, codec
from memsdk.bank.indexing import CONTEXT_WEIGHT, HEADER_WEIGHT
from memsdk.errors import Conflict, ImportConflict, InvalidInput, MemoryNotFound, ScopeRequired
from memsdk.embedding import HashEmbedder
from memsdk.store.base import SCOPE_TIER_FIELD, Point, Sparse, Where, scope_tier_key
from memsdk.types import Actor, EventType, Op, OpType, Scope, content_hash

from .conftest import DIM, BankFactory


def add(bank: MemoryBank, scope: Scope, *texts: str) -> list[uuid.UUID]:
    return [c.after.id for c in bank.apply(scope, [Op.add(t) for t in texts]).changes]


def test_add_update_delete_restore_roundtrip(bank: MemoryBank, alice: Scope) -> None:
    (buddy,) = add(bank, alice, "Has a dog named Buddy")
    bank.apply(alice, [Op.update(buddy, "Has two dogs, Buddy and Scout")], actor=Actor(role="manager", version="v1"))
    assert bank.get(alice, buddy).text == "Has two dogs, Buddy and Scout"
    assert bank.get(alice, buddy).version == 2

    bank.apply(alice, [Op.delete(buddy)])
    with pytest.raises(MemoryNotFound):
        bank.get(alice, buddy)
    assert bank.get(alice, buddy, include_deleted=True).deleted
    assert bank.count(alice) == 0 and bank.search(alice, "dogs") == []

    restored = bank.restore(alice, buddy)
    assert (restored.text, restored.version, restored.deleted) == ("Has two dogs, Buddy and Scout", 4, False)
    assert bank.search(alice, "dogs Buddy Scout")[0].record.id == buddy


def test_history_records_every_change_with_actor(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Likes tea")
    manager = Actor(role="manager", version="ckpt-7")
    bank.apply(alice, [Op.update(mid, "Likes green tea")], actor=manager)
    bank.apply(alice, [Op.delete(mid)], actor=manager)
    bank.restore(alice, mid)
    events = bank.history(alice, mid)
    assert [(e.event, e.before, e.after, str(e.actor), e.version) for e in events] == [
        (EventType.ADD, None, "Likes tea", "api", 1),
        (EventType.UPDATE, "Likes tea", "Likes green tea", "manager@ckpt-7", 2),
        (EventType.DELETE, "Likes green tea", None, "manager@ckpt-7", 3),
        (EventType.RESTORE, None, "Likes green tea", "api", 4),
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)


def test_batch_is_atomic_when_a_later_op_is_invalid(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Works at a bakery")
    before_history = bank.history(alice)
    bad = [Op.add("Moved to Lyon"), Op.update(mid, "Works at a cafe"), Op.delete(uuid.uuid4())]
    with pytest.raises(MemoryNotFound) as err:
        bank.apply(alice, bad)
    assert err.value.field == "ops[2].target"
    assert [r.text for r in bank.list(alice)] == ["Works at a bakery"]
    assert bank.history(alice) == before_history


def test_ops_in_a_batch_see_earlier_ops(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Plays chess")
    t = bank.apply(alice, [Op.update(mid, "Plays chess weekly"), Op.update(mid, "Plays chess daily")])
    assert bank.get(alice, mid).text == "Plays chess daily"
    assert bank.get(alice, mid).version == 3
    assert [e.before for e in t.events] == ["Plays chess", "Plays chess weekly"]
    with pytest.raises(Conflict):
        bank.apply(alice, [Op.delete(mid), Op.update(mid, "too late")])
    assert bank.get(alice, mid).text == "Plays chess daily"


def test_an_op_decided_on_a_stale_version_is_a_conflict_and_writes_nothing(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Has a dog named Buddy")
    bank.apply(alice, [Op.update(mid, "Has a dog named Buddy; likes tea", expected_version=1)])  # writer A read v1
    before = bank.history(alice)
    for stale in (Op.update(mid, "Has a dog named Buddy; owns a car", expected_version=1), Op.delete(mid, expected_version=1)):
        with pytest.raises(Conflict) as err:  # writer B also read v1: its op would drop "likes tea"
            bank.apply(alice, [Op.add("Lives in Oslo"), stale])
        assert err.value.field == "ops[1].target" and "version 2" in str(err.value)
    assert bank.history(alice) == before and [r.text for r in bank.list(alice)] == ["Has a dog named Buddy; likes tea"]
    bank.apply(alice, [Op.update(mid, "Has a dog named Buddy; likes tea; owns a car", expected_version=2)])
    assert bank.get(alice, mid).version == 3


def test_update_with_identical_text_and_noop_record_nothing(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Is vegetarian")
    t = bank.apply(alice, [Op.update(mid, "Is vegetarian"), Op.noop(mid), Op.noop()])
    assert t.events == [] and bank.get(alice, mid).version == 1
    assert len(bank.history(alice)) == 1


def test_update_merges_metadata_and_source_turns(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = [c.after.id for c in bank.apply(alice, [Op.add("Runs", source_turn_ids=("D1:1",), metadata={"a": 1})]).changes]
    bank.apply(alice, [Op.update(mid, "Runs marathons", source_turn_ids=("D2:4", "D1:1"), metadata={"b": [2]})])
    rec = bank.get(alice, mid)
    assert rec.source_turn_ids == ("D1:1", "D2:4")
    assert rec.metadata == {"a": 1, "b": [2]}


def test_count_by_turn_id_finds_the_records_of_one_turn_whatever_their_text(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    """What a replayed accepted ingest asks: does the scope hold this turn? By its id, an
    indexed lookup; texts repeat."""
    ids = [c.after.id for c in bank.apply(alice, [Op.add("ok", tier="episodic", source_turn_ids=(f"ok-{i}",)) for i in range(3)]).changes]
    bank.apply(alice, [Op.add("Says ok a lot", source_turn_ids=("ok-1", "ok-2"))])  # a fact of two turns
    bank.apply(bob, [Op.add("ok", tier="episodic", source_turn_ids=("ok-9",))])
    bank.apply(alice, [Op.delete(ids[0])], actor=Actor(role="api"))
    assert [bank.count(alice, tier="episodic", turn_id=f"ok-{i}") for i in range(4)] == [0, 1, 1, 0]
    assert bank.count(alice, tier="episodic", include_deleted=True, turn_id="ok-0") == 1  # a deleted turn is still the turn
    assert bank.count(alice, turn_id="ok-2") == 2 and bank.count(alice, turn_id="ok-9") == 0 and bank.count(bob, turn_id="ok-9") == 1
    with pytest.raises(InvalidInput):
        bank.count(alice, turn_id="")


def test_scope_is_a_hard_partition_for_every_read(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    (secret,) = add(bank, alice, "Alice's bank PIN is 4321")
    add(bank, bob, "Bob likes hiking")
    bank.apply(alice, [Op.update(secret, "Alice's bank PIN is 9876")])
    narrower = Scope(user_id="alice", agent_id="support")  # a different partition, not a superset
    for other in (bob, narrower):
        with pytest.raises(MemoryNotFound):
            bank.get(other, secret)
        with pytest.raises(MemoryNotFound):
            bank.get(other, secret, include_deleted=True)
        with pytest.raises(MemoryNotFound):
            bank.history(other, secret)
        assert all("PIN" not in r.text for r in bank.list(other, include_deleted=True))
        assert all("PIN" not in h.record.text for h in bank.search(other, "bank PIN", limit=50))
        assert all("PIN" not in (e.after or "") + (e.before or "") for e in bank.history(other))
        out = io.StringIO()
        bank.export(other, out)
        assert "PIN" not in out.getvalue()
        assert "PIN" not in str(bank.snapshot(other).records(include_deleted=True))


def test_writes_cannot_reach_another_scope(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    (secret,) = add(bank, alice, "Alice's diary entry")
    for op in (Op.update(secret, "overwritten by bob"), Op.delete(secret), Op.noop(secret)):
        with pytest.raises(MemoryNotFound):
            bank.apply(bob, [op])
    with pytest.raises(MemoryNotFound):
        bank.restore(bob, secret)
    assert bank.get(alice, secret).text == "Alice's diary entry"
    assert bank.delete_all(bob) == 0
    assert bank.count(alice) == 1


def test_search_ranks_and_limits(bank: MemoryBank, alice: Scope) -> None:
    add(bank, alice, "Has a cat named Luna", "Works as a nurse in Boston", "Plays the violin")
    hits = bank.search(alice, "nurse Boston", limit=2)
    assert len(hits) == 2
    assert hits[0].record.text == "Works as a nurse in Boston"
    assert hits[0].score >= hits[1].score
    with pytest.raises(InvalidInput) as err:
        bank.search(alice, "x", limit=0)
    assert err.value.field == "limit"
    with pytest.raises(InvalidInput):
        bank.search(alice, "   ")


def test_scopes_lists_the_scopes_holding_a_live_memory(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    assert bank.scopes() == []
    support, zoe = Scope(user_id="alice", agent_id="support"), Scope(user_id="zoë", run_id="chat 1")
    add(bank, alice, "Likes tea", "Plays chess")
    (moved,) = add(bank, bob, "Moved to Lyon")
    add(bank, support, "Prefers email")
    add(bank, zoe, "Speaks Greek")
    everyone = sorted([alice, bob, support, zoe], key=lambda s: s.key)
    assert bank.scopes() == everyone
    bank.apply(bob, [Op.delete(moved)])  # only soft-deleted memories (and their history) left
    assert bank.scopes() == [s for s in everyone if s != bob]
    assert sorted(bank.transport.scope_keys(10, include_deleted=True)) == sorted(s.key for s in everyone)  # what an erase must look through
    bank.restore(bob, moved)
    assert bank.scopes() == everyone
    bank.delete_all(alice)
    assert alice not in bank.scopes()
    with pytest.raises(InvalidInput) as err:  # never a silently partial list
        bank.scopes(limit=2)
    assert err.value.field == "limit"


def test_scope_keys_narrow_to_one_conversation(bank: MemoryBank) -> None:
    """What a forget looks through for a conversation's other scopes: only that run_id's,
    deleted-only scopes included on request, never another conversation's or a scope without one."""
    ann, ben, cy = Scope(user_id="ann", run_id="c1"), Scope(user_id="ben", run_id="c1"), Scope(user_id="cy", run_id="c1")
    add(bank, ann, "Likes tea")
    add(bank, ben, "Plays chess", "Runs marathons")
    (gone,) = add(bank, cy, "Moved to Lyon")
    bank.apply(cy, [Op.delete(gone)])
    add(bank, Scope(user_id="ann", run_id="c2"), "Speaks Greek")
    add(bank, Scope(user_id="ann"), "Prefers email")
    keys = bank.transport.scope_keys
    assert sorted(keys(10, include_deleted=True, run_id="c1")) == sorted(s.key for s in (ann, ben, cy))
    assert keys(10, run_id="c1") == [ben.key, ann.key]  # live only, the fullest first
    assert keys(10, run_id="c3") == []
    assert len(keys(10)) == 4  # without a run_id, every scope with a live memory


def test_delete_all_unquotes_the_scope_from_its_conversations_other_scopes(bank: MemoryBank) -> None:
    ann, ben, elsewhere = Scope(user_id="ann", run_id="c1"), Scope(user_id="ben", run_id="c1"), Scope(user_id="cy", run_id="c2")
    ingest = Actor(role="ingest")
    (asked,) = bank.apply(ann, [Op.add("Where is the secret key?", tier="episodic", speaker="Ann")], actor=ingest).records
    quote = asked.text
    (reply,) = bank.apply(ben, [Op.add("Under the mat", tier="episodic", speaker="Ben", context=quote)], actor=ingest).records
    (gone,) = bank.apply(ben, [Op.add("Behind the door", tier="episodic", speaker="Ben", context=quote)], actor=ingest).records
    bank.apply(ben, [Op.delete(gone.id)])  # soft-deleted records are unquoted too: they are still on disk
    (other,) = bank.apply(elsewhere, [Op.add("Same words", tier="episodic", speaker="Cy", context=quote)], actor=ingest).records
    assert reply.context_hash == content_hash(quote) and "secret" not in reply.model_dump_json()  # indexed by, never holding, Ann's words
    bank.delete_all(ann)
    assert bank.get(ben, reply.id).context_hash is None and bank.get(ben, gone.id, include_deleted=True).context_hash is None
    assert bank.get(ben, reply.id).text == "Under the mat" and bank.get(ben, reply.id).version == 1
    assert bank.get(elsewhere, other.id).context_hash == content_hash(quote)  # another conversation never quoted Ann


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_a_turn_after_a_context_is_embedded_as_itself_plus_half_the_context_turn_as_shown(bank: MemoryBank) -> None:
    """The dense vector of a turn with a context is unit(own + CONTEXT_WEIGHT x context), each
    as its turn is shown: unit(words + HEADER_WEIGHT x header); BM25 still reads the context's
    words alone."""
    ben = Scope(user_id="ben", run_id="c1")
    op = Op.add("Under the mat", tier="episodic", speaker="Ben", context="Where is the key?", context_header="Ann (on 8 May 2023)")
    (reply,) = bank.apply(ben, [op], actor=Actor(role="ingest")).records
    (point,) = bank.transport.scroll(codec.memories(ben, ids=frozenset({str(reply.id)})), with_vectors=True)
    words, header, said, said_header = HashEmbedder(DIM).embed(["Under the mat", "Ben", "Where is the key?", "Ann (on 8 May 2023)"])
    mixed = _unit(words + HEADER_WEIGHT * header) + CONTEXT_WEIGHT * _unit(said + HEADER_WEIGHT * said_header)
    np.testing.assert_allclose(point.vector, _unit(mixed), atol=1e-6)
    assert [h.record.id for h in bank.search(ben, "Where is the key?", limit=1, tier="episodic")] == [reply.id]
    with pytest.raises(ValueError, match="needs a context"):
        Op.add("Under the mat", context_header="Ann")


def test_a_fact_that_copies_its_turn_is_embedded_as_the_turn_header_and_words_apart(bank: MemoryBank) -> None:
    """A turn and the fact copying it ("Speaker (on date): words") share one vector, made of
    the words and the header embedded apart, so an ingest embeds the turn's words once (the
    header repeats across a session); a fact without a header is embedded as written."""
    ben = Scope(user_id="ben")
    ops = [
        Op.add("Under the mat", tier="episodic", speaker="Ben", metadata={"timestamp": "8 May 2023"}),
        Op.add("Ben (on 8 May 2023): Under the mat"),
        Op.add("Ben keeps the key under the mat"),
    ]
    turn, fact, plain = bank.apply(ben, ops, actor=Actor(role="ingest")).records
    vectors = {p.id: p.vector for p in bank.transport.scroll(codec.memories(ben), with_vectors=True)}
    words, header, written = HashEmbedder(DIM).embed(["Under the mat", "Ben (on 8 May 2023)", "Ben keeps the key under the mat"])
    np.testing.assert_allclose(vectors[str(turn.id)], _unit(words + HEADER_WEIGHT * header), atol=1e-6)
    np.testing.assert_allclose(vectors[str(fact.id)], vectors[str(turn.id)], atol=1e-6)
    np.testing.assert_allclose(vectors[str(plain.id)], written, atol=1e-6)


def test_a_deleted_turn_leaves_the_index_of_the_turns_after_it(bank: MemoryBank) -> None:
    """A forget soft-deletes the turns that said it; the replies indexed after them (same scope,
    or its conversation's other scopes) are indexed again from their own words, so a search for
    the forgotten words stops finding them. Other conversations and other contexts keep theirs."""
    ann, ben, elsewhere = Scope(user_id="ann", run_id="c1"), Scope(user_id="ben", run_id="c1"), Scope(user_id="cy", run_id="c2")
    ingest = Actor(role="ingest")
    said = "My locker code is 4471 at the gym"
    (told,) = bank.apply(ann, [Op.add(said, tier="episodic", speaker="Ann")], actor=ingest).records
    (own,) = bank.apply(ann, [Op.add("Please keep it to yourself", tier="episodic", speaker="Ann", context=said)], actor=ingest).records
    (reply,) = bank.apply(ben, [Op.add("Sure, noted", tier="episodic", speaker="Ben", context=said)], actor=ingest).records
    (kept,) = bank.apply(ben, [Op.add("Lunch at noon then", tier="episodic", speaker="Ben", context="Shall we eat at noon?")], actor=ingest).records
    (other,) = bank.apply(elsewhere, [Op.add("Same reply", tier="episodic", speaker="Cy", context=said)], actor=ingest).records
    (twin,) = bank.apply(Scope(user_id="dan"), [Op.add("Sure, noted", tier="episodic", speaker="Ben")], actor=ingest).records  # the same turn, indexed after nothing
    score = lambda scope, mid: next(h.score for h in bank.search(scope, said, limit=5, tier="episodic") if h.record.id == mid)  # noqa: E731
    assert score(ben, reply.id) > score(Scope(user_id="dan"), twin.id) + 0.05  # found by the words it was indexed after
    bank.apply(ann, [Op.delete(told.id)])
    assert bank.get(ann, own.id).context_hash is None and bank.get(ben, reply.id).context_hash is None
    assert score(ben, reply.id) == pytest.approx(score(Scope(user_id="dan"), twin.id), abs=1e-5)  # now only by its own
    assert bank.get(ben, reply.id).version == reply.version and bank.get(ben, reply.id).text == "Sure, noted"  # no new version: only its index changed
    assert bank.get(ben, kept.id).context_hash == content_hash("Shall we eat at noon?")
    assert bank.get(elsewhere, other.id).context_hash == content_hash(said)  # another conversation is not this one's to change
    bank.restore(ann, told.id)
    assert bank.get(ben, reply.id).context_hash is None  # a restore brings the turn back, not its place in other turns' indexes


def test_delete_all_erases_records_and_history(factory: BankFactory, alice: Scope, bob: Scope) -> None:
    bank = factory.open()
    (mid,) = add(bank, alice, "Alice's address is 1 Main St")
    add(bank, bob, "Bob's address is 2 Side St")
    bank.apply(alice, [Op.delete(mid)])
    assert bank.delete_all(alice) == 1
    assert bank.list(alice, include_deleted=True) == [] and bank.history(alice) == []
    if factory.engine.persistent:
        bank = factory.reopen()
    assert bank.list(alice, include_deleted=True) == [] and bank.history(alice) == []
    assert [r.text for r in bank.list(bob)] == ["Bob's address is 2 Side St"]


def test_data_and_history_survive_reopen(factory: BankFactory, alice: Scope) -> None:
    bank = factory.open()
    (mid,) = add(bank, alice, "Speaks Portuguese")
    bank.apply(alice, [Op.update(mid, "Speaks Portuguese and Spanish")])
    before = (bank.list(alice), bank.history(alice))
    bank = factory.reopen()
    assert (bank.list(alice), bank.history(alice)) == before
    bank.apply(alice, [Op.delete(mid)])  # seq keeps growing after a restart
    assert bank.history(alice)[-1].seq > before[1][-1].seq


def test_export_import_roundtrip_is_exact(bank: MemoryBank, alice: Scope, tmp_path) -> None:
    (a, b) = add(bank, alice, "Born in 1990", "Allergic to peanuts")
    bank.apply(alice, [Op.update(a, "Born in March 1990"), Op.delete(b)])
    path = tmp_path / "alice.jsonl"
    assert bank.export(alice, path) == 2
    original = path.read_text()
    bank.delete_all(alice)
    assert bank.import_(path) == 2
    again = io.StringIO()
    bank.export(alice, again)
    assert again.getvalue() == original
    assert bank.search(alice, "born March")[0].record.id == a
    with pytest.raises(ImportConflict) as err:
        bank.import_(path)  # same ids again: refused, nothing duplicated
    assert str(a) not in str(err.value) and str(b) not in str(err.value)  # and no id is confirmed
    # a copy into another scope of the same store gets fresh ids: alice's records are untouched
    mallory = Scope(user_id="mallory")
    assert bank.import_(path, scope=mallory) == 2
    copied = bank.list(mallory, include_deleted=True)
    assert sorted((r.text, r.deleted, r.version) for r in copied) == sorted((r.text, r.deleted, r.version) for r in bank.list(alice, include_deleted=True))
    assert not {r.id for r in copied} & {a, b}
    assert {e.memory_id for e in bank.history(mallory)} == {r.id for r in copied}
    assert bank.get(alice, a).text == "Born in March 1990"


def test_import_into_another_scope(bank: MemoryBank, alice: Scope, tmp_path) -> None:
    add(bank, alice, "Drinks coffee")
    path = tmp_path / "a.jsonl"
    bank.export(alice, path)
    bank.delete_all(alice)
    carol = Scope(user_id="carol", agent_id="assistant")
    bank.import_(path, scope=carol)
    assert [r.text for r in bank.list(carol)] == ["Drinks coffee"]
    assert bank.list(carol)[0].scope == carol and bank.history(carol)[0].scope == carol
    assert bank.list(alice) == []


@pytest.mark.parametrize(
    "mangle, field",
    [
        (lambda lines: lines[:-1], "file"),  # truncated: a line missing
        (lambda lines: lines[:1] + ['{"type": "memory", "record": {"id": "x"'], "line 2"),  # cut mid-line
        (lambda lines: ["not json"] + lines[1:], "line 1"),
        (lambda lines: [], "line 1"),
        (lambda lines: lines[:1] + ['{"type": "bogus"}'] + lines[1:], "line 2.type"),
    ],
)
def test_import_rejects_broken_files_and_writes_nothing(bank: MemoryBank, alice: Scope, mangle, field) -> None:
    add(bank, alice, "Owns a red bike")
    out = io.StringIO()
    bank.export(alice, out)
    bank.delete_all(alice)
    broken = "\n".join(mangle(out.getvalue().splitlines())) + "\n"
    with pytest.raises(InvalidInput) as err:
        bank.import_(io.StringIO(broken))
    assert err.value.field == field
    assert bank.count(alice, include_deleted=True) == 0 and bank.history(alice) == []


def test_snapshot_fork_is_isolated(bank: MemoryBank, alice: Scope) -> None:
    (mid,) = add(bank, alice, "Has a dog named Buddy")
    snap = bank.snapshot(alice)
    child = MemoryBank.from_snapshot(snap, bank.embedder)
    child.apply(alice, [Op.update(mid, "Has two dogs, Buddy and Scout"), Op.add("Adopted Scout in May")])
    assert bank.get(alice, mid).text == "Has a dog named Buddy"
    assert bank.count(alice) == 1
    assert child.count(alice) == 2 and child.get(alice, mid).version == 2
    sibling = MemoryBank.from_snapshot(snap, bank.embedder)  # the snapshot itself did not change either
    assert [r.text for r in sibling.list(alice)] == ["Has a dog named Buddy"]
    grandchild = child.fork(alice)  # forks of forks: Memory-R2's anchor states
    assert grandchild.search(alice, "Scout")[0].record.text in {"Has two dogs, Buddy and Scout", "Adopted Scout in May"}
    assert len(grandchild.history(alice)) == 3


@pytest.mark.parametrize(
    "ops, field",
    [
        ([{"op": "ADD", "text": ""}], "ops[0].text"),
        ([{"op": "ADD", "text": "   \n"}], "ops[0].text"),
        ([{"op": "ADD", "text": "ok"}, {"op": "ADD", "text": "bad \udcff"}], "ops[1].text"),
        ([{"op": "ADD", "text": "x" * 5000}], "ops[0].text"),
        ([{"op": "ADD", "text": "ok", "metadata": {1: "non-string key"}}], "ops[0].metadata[1] (the key)"),
        ([{"op": "UPDATE", "target": "not-a-uuid", "text": "x"}], "ops[0].target"),
        ([{"op": "EXPLODE"}], "ops[0].op"),
        ([{"op": "DELETE"}], "ops[0]"),
    ],
)
def test_bad_ops_name_the_field_and_change_nothing(bank: MemoryBank, alice: Scope, ops, field) -> None:
    add(bank, alice, "Existing memory")
    before = (bank.list(alice, include_deleted=True), bank.history(alice))
    with pytest.raises(InvalidInput) as err:
        bank.apply(alice, ops)
    assert err.value.field == field, str(err.value)
    assert (bank.list(alice, include_deleted=True), bank.history(alice)) == before


@pytest.mark.parametrize(
    "scope, error, field",
    [
        (None, ScopeRequired, "scope"),
        ({}, ScopeRequired, "scope"),
        ({"user_id": None}, ScopeRequired, "scope"),
        ({"user_id": ""}, InvalidInput, "scope.user_id"),
        ({"user_id": "a\x07b"}, InvalidInput, "scope.user_id"),
        ({"user_id": "u", "tenant": "t"}, InvalidInput, "scope.tenant"),
        ("alice", InvalidInput, "scope"),
    ],
)
def test_malformed_scope_is_rejected(bank: MemoryBank, scope, error, field) -> None:
    with pytest.raises(error) as err:
        bank.apply(scope, [Op.add("x")])
    assert err.value.field == field


def test_unknown_ids_are_typed_errors(bank: MemoryBank, alice: Scope) -> None:
    with pytest.raises(MemoryNotFound) as err:
        bank.get(alice, uuid.uuid4())
    assert "not found in this scope" in str(err.value)
    with pytest.raises(InvalidInput):
        bank.get(alice, "12")
    with pytest.raises(MemoryNotFound):
        bank.restore(alice, uuid.uuid4())
    (mid,) = add(bank, alice, "x")
    with pytest.raises(Conflict):
        bank.restore(alice, mid)  # not deleted


def test_op_shapes_are_validated() -> None:
    with pytest.raises(ValueError):
        Op.add("x", expected_version=1)  # an ADD has no target whose version it could expect
    with pytest.raises(ValueError):
        Op.update(uuid.uuid4(), "x", expected_version=0)
    with pytest.raises(ValueError):
        Op(op=OpType.ADD, target=uuid.uuid4(), text="x")
    with pytest.raises(ValueError):
        Op(op=OpType.DELETE, target=uuid.uuid4(), text="x")
    with pytest.raises(ValueError):
        Op(op=OpType.UPDATE, text="x")


def _export_lines(bank: MemoryBank, scope: Scope) -> list[dict]:
    out = io.StringIO()
    bank.export(scope, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _write(lines: list[dict], path) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _memory(lines: list[dict]) -> dict:
    return next(line for line in lines if line.get("type") == "memory")["record"]


def _events(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line.get("type") == "event"]


def _drop_events(lines: list[dict], keep) -> list[dict]:
    kept = [line for line in lines if line.get("type") != "event" or keep(line["event"])]
    kept[0] = {**kept[0], "events": sum(line.get("type") == "event" for line in kept)}
    return kept


INCONSISTENT = [
    # a record at v99 whose history has only events 1-2
    (lambda ls: [ls[0], {"type": "memory", "record": {**_memory(ls), "version": 99}}, *ls[2:]], "records[0].version"),
    # a record whose text no event wrote (its hash made to match, so only the history can tell)
    (lambda ls: [ls[0], {"type": "memory", "record": {**_memory(ls), "text": "Owns a yacht", "content_hash": content_hash("Owns a yacht")}}, *ls[2:]], "records[0].text"),
    # deleted=true with no DELETE event
    (lambda ls: [ls[0], {"type": "memory", "record": {**_memory(ls), "deleted": True}}, *ls[2:]], "records[0].deleted"),
    # a wrong content hash
    (lambda ls: [ls[0], {"type": "memory", "record": {**_memory(ls), "content_hash": "0" * 64}}, *ls[2:]], "records[0].content_hash"),
    # a record with no events at all
    (lambda ls: _drop_events(ls, lambda e: False), "records[0].version"),
    # an orphan event naming an id that belongs to no record
    (lambda ls: [{**ls[0], "events": ls[0]["events"] + 1}, *ls[1:], {"type": "event", "event": {**_events(ls)[0]["event"], "id": str(uuid.uuid4()), "memory_id": str(uuid.uuid4())}}], "events[2].memory_id"),
]


@pytest.mark.parametrize("mangle, field", INCONSISTENT, ids=["version-beyond-history", "text-no-event-wrote", "deleted-without-delete", "bad-hash", "no-events", "orphan-event"])
def test_import_refuses_a_history_that_does_not_explain_its_records(bank: MemoryBank, alice: Scope, tmp_path, mangle, field) -> None:
    (mid,) = add(bank, alice, "Plays the oboe")
    bank.apply(alice, [Op.update(mid, "Plays the oboe and the flute")])
    lines = _export_lines(bank, alice)
    path = tmp_path / "bad.jsonl"
    _write(mangle(lines), path)
    bob = Scope(user_id="bob")
    with pytest.raises(InvalidInput) as err:
        bank.import_(path, scope=bob)
    assert err.value.field == field
    assert bank.count(bob, include_deleted=True) == 0 and bank.history(bob) == []


class FlatEmbedder(HashEmbedder):
    """Every text gets the same vector: dense search cannot tell memories apart, so any
    order a hybrid search finds comes from BM25."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_tier_is_stored_filtered_and_exported(bank: MemoryBank, alice: Scope, tmp_path) -> None:
    bank.apply(alice, [Op.add("Sam said hi", tier="episodic", speaker="Sam", occurred_at=datetime(2023, 5, 8, tzinfo=UTC))], actor=Actor(role="ingest"))
    bank.apply(alice, [Op.add("Sam likes tea"), Op.add("Sam: a nurse who likes tea", tier="core")])
    assert {r.text: r.tier for r in bank.list(alice)} == {"Sam said hi": "episodic", "Sam likes tea": "semantic", "Sam: a nurse who likes tea": "core"}
    assert [r.text for r in bank.list(alice, tier="core")] == ["Sam: a nurse who likes tea"] and bank.count(alice, tier="episodic") == 1
    assert {h.record.tier for h in bank.search(alice, "tea", tier="semantic")} == {"semantic"}
    assert sorted(e.tier for e in bank.history(alice)) == ["core", "episodic", "semantic"]
    with pytest.raises(InvalidInput) as err:
        bank.list(alice, tier="archival")
    assert err.value.field == "tier"
    bank.export(alice, tmp_path / "a.jsonl")
    copy = Scope(user_id="alice", agent_id="copy")
    bank.import_(tmp_path / "a.jsonl", scope=copy)
    (turn,) = bank.list(copy, tier="episodic")
    assert (turn.speaker, turn.occurred_at, turn.render()) == ("Sam", datetime(2023, 5, 8, tzinfo=UTC), "Sam (on 8 May 2023): Sam said hi")


def test_hybrid_search_finds_the_exact_word_dense_search_cannot_see(engine, tmp_path, alice: Scope, bob: Scope) -> None:
    with MemoryBank(engine.make(tmp_path), FlatEmbedder(DIM)) as bank:
        texts = ["Went hiking with friends", "Cooked dinner for the family", "My zebra is named Stripes", "Read a book about gardens"]
        bank.apply(alice, [Op.add(t) for t in texts])
        bank.apply(bob, [Op.add("zebra zebra zebra zebra")])  # another scope: never returned
        hits = bank.search(alice, "what is the zebra called", limit=2, hybrid=True)
        assert hits[0].record.text == "My zebra is named Stripes" and all(h.record.scope == alice for h in hits)
        assert hits[0].score > hits[1].score  # fused: in both rankings beats in one
        deleted = bank.apply(alice, [Op.delete(hits[0].record.id)]).records[0]
        assert deleted.id not in {h.record.id for h in bank.search(alice, "zebra", limit=4, hybrid=True)}
        bank.restore(alice, deleted.id)  # a restore keeps the memory's BM25 vector
        assert bank.search(alice, "zebra", limit=1, hybrid=True)[0].record.id == deleted.id
        fork = bank.fork(alice)  # forks (training) search the same way
        assert fork.search(alice, "zebra", limit=1, hybrid=True)[0].record.id == deleted.id


@pytest.mark.parametrize("crowd", ["another scope", "another tier"])
def test_hybrid_idf_is_the_scopes_tiers_own(engine, tmp_path, crowd: str) -> None:
    """BM25 weighs a word by how rare it is in the tier searched of the caller's scope, not in
    the store: 20 memories saying "t2" in another user's scope, or in this scope's episodic
    tier, must not change the order of this scope's semantic memories. Dense ranks c, a, b,
    d; BM25 decides between a ("t1") and b ("t2"): in this corpus t1 is the commoner word (a
    and d), so b wins; an IDF that counted the crowd (t2 in 21 memories) would pick a."""
    transport = engine.make(tmp_path)
    mine, theirs = "scope-mine", "scope-theirs"

    def point(scope_key: str, tier: str, angle: float, terms: dict[int, float]) -> Point:
        vector = np.zeros(DIM, dtype=np.float32)
        vector[:2] = np.cos(angle), np.sin(angle)
        payload = {"scope_key": scope_key, "kind": "memory", "state": "live", "tier": tier, SCOPE_TIER_FIELD: scope_tier_key(scope_key, tier)}
        return Point(str(uuid.uuid4()), payload, vector, Sparse(tuple(terms), tuple(terms.values())))

    c, a, b, d = (point(mine, "semantic", angle, terms) for angle, terms in ((0.0, {3: 1.0}), (0.6, {1: 1.0}), (0.9, {2: 1.0}), (1.2, {1: 0.01})))
    where, tier = (theirs, "semantic") if crowd == "another scope" else (mine, "episodic")
    transport.upsert([c, a, b, d] + [point(where, tier, 1.5, {2: 1.0}) for _ in range(20)])
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    hits = transport.search(query, Where(scope_key=mine, kind="memory", deleted=False, tier="semantic"), 4, sparse=Sparse((1, 2), (1.0, 1.0)))
    assert [h.point.id for h in hits][:2] == [b.id, a.id]
    transport.close()


def test_adjacent_is_the_live_turns_said_right_before_and_after(bank: MemoryBank, alice: Scope, bob: Scope) -> None:
    """A turn's context hash names the turn before it, whichever scope said it: `adjacent`
    returns the scope's live episodic turns right before or after the records asked about,
    never another scope's, never a forgotten one; a repeated text names each of its turns."""

    def turn(scope: Scope, text: str, before: str | None = None) -> uuid.UUID:
        return bank.apply(scope, [Op.add(text, tier="episodic", context=before)]).changes[0].after.id

    puppy = turn(alice, "We adopted a puppy last week")
    name = turn(bob, "What did you name it?", "We adopted a puppy last week")
    buddy = turn(alice, "Buddy, after my grandfather", "What did you name it?")
    rome = turn(alice, "Anyway, how was Rome?", "Buddy, after my grandfather")
    bank.apply(alice, [Op.add("Buddy, after my grandfather")])  # a semantic fact with the same text: not a turn
    get = lambda scope, mid: bank.get(scope, mid)  # noqa: E731
    ids = lambda records: {r.id for r in records}  # noqa: E731
    assert ids(bank.adjacent(alice, [get(bob, name)])) == {puppy, buddy}
    assert ids(bank.adjacent(bob, [get(alice, buddy)])) == {name}
    assert ids(bank.adjacent(alice, [get(alice, buddy)])) == {rome}
    assert bank.adjacent(alice, [get(alice, puppy)]) == []  # what follows it is bob's
    again = turn(alice, "Anyway, how was Rome?", "Buddy, after my grandfather")
    assert ids(bank.adjacent(alice, [get(alice, buddy)])) == {rome, again}
    bank.apply(alice, [Op.delete(rome), Op.delete(again)], actor=Actor(role="forget"))
    assert bank.adjacent(alice, [get(alice, buddy)]) == []
