"""A large scope's tier in a shard of its own (`EdgeTransport.dedicate`): the same answers as
the shared shard, the same durability, and nothing left behind by a move, an erase or a kill.

The bank contract suite runs on such a store too (`tests/bank/conftest.py`, engine
``edge-dedicated``); these are what only this layout has: the move itself, the journal that
keeps a batch across shards whole, and the files on disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memsdk.bank import MemoryBank
from memsdk.errors import StoreError
from memsdk.store.base import Point, Sparse, Where, scope_tier_key
from memsdk.store.edge import EdgeTransport
from memsdk.store.edge.durability import Layout, decode_point, decode_where, encode_point, encode_where
from memsdk.types import Op, Scope
from tests.store.conftest import Jittered, ranked

DIM = 64
ALICE, BOB = Scope(user_id="alice"), Scope(user_id="bob")
SEMANTIC = scope_tier_key(ALICE.key, "semantic")
EPISODIC = scope_tier_key(ALICE.key, "episodic")
WORDS = "bees honey lavender hive garden lyon paris salary dog buddy scout anna hanna tennis".split() + [f"w{i}" for i in range(40)]


def open_bank(path: Path, dedicate_after: int | None) -> MemoryBank:
    return MemoryBank(EdgeTransport(path, dim=DIM, dedicate_after=dedicate_after), Jittered(DIM))


def fill(bank: MemoryBank, n: int = 12) -> None:
    """Alice's facts and turns, Bob's few facts: the same writes, whatever the layout. Each
    text has its own length, so no two BM25 scores tie either."""
    rng = np.random.default_rng(7)
    for i in range(n):
        said = " ".join(rng.choice(WORDS, size=2 + i))
        bank.apply(ALICE, [Op.add(f"fact {i}: {said}")])
        bank.apply(ALICE, [Op.add(f"turn {i}: I said {said}", tier="episodic")])
    first = bank.list(ALICE, tier="semantic")[0]
    bank.apply(ALICE, [Op.update(first.id, first.text + " (confirmed)"), Op.delete(bank.list(ALICE, tier="semantic")[1].id)])
    bank.apply(BOB, [Op.add("Bob's bees live in Paris"), Op.add("Bob plays tennis with Anna")])


def view(bank: MemoryBank, scope: Scope) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """A scope's records and history without what differs between two banks (ids, times)."""
    records = sorted((r.text, r.version, r.deleted, r.tier) for r in bank.list(scope, include_deleted=True))
    events = [(e.event, e.before, e.after, e.version, e.tier) for e in bank.history(scope)]
    return records, events


def searches(bank: MemoryBank) -> list[list[tuple[float, frozenset[str]]]]:
    return [
        ranked(bank.search(ALICE, query, limit=6, tier=tier, hybrid=hybrid))
        for query in ("bees in lyon", "anna plays tennis", "salary")
        for tier in ("semantic", "episodic")
        for hybrid in (False, True)
    ]


def test_a_scope_tier_past_dedicate_after_moves_to_a_shard_of_its_own(tmp_path: Path) -> None:
    with open_bank(tmp_path / "shared", None) as shared, open_bank(tmp_path / "own", 5) as own:
        fill(shared)
        fill(own)
        transport = own.transport
        assert isinstance(transport, EdgeTransport)
        assert set(transport.dedicated()) == {SEMANTIC, EPISODIC}  # Bob's two facts stay shared
        assert view(own, ALICE) == view(shared, ALICE) and view(own, BOB) == view(shared, BOB)
        # the same ranking and the same fused scores: in its own shard a tier's BM25 statistics
        # are exactly the ones the shared shard computes over the scope's tier (`Where.corpus`)
        assert searches(own) == searches(shared)
        assert own.count(ALICE, include_deleted=True) == 24 and own.scopes() == [ALICE, BOB]
        # nothing of Alice's is left in the shared shard: only Bob's records and their events
        left = transport._routes.shared.engine
        import qdrant_edge as qe

        assert left.count(qe.CountRequest(exact=True)) == 2 + 2
        expected = searches(shared)
    with open_bank(tmp_path / "own", 5) as reopened:
        assert set(reopened.transport.dedicated()) == {SEMANTIC, EPISODIC}  # type: ignore[attr-defined]
        assert searches(reopened) == expected


def test_a_batch_across_two_shards_is_whole_after_a_kill_between_them(tmp_path: Path) -> None:
    """The journal: the child dies right after the first shard of a two-shard batch is written;
    the next open replays the batch, so both of its tiers hold their part."""
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(
            """
            import os, sys
            from memsdk.bank import MemoryBank
            from memsdk.embedding import HashEmbedder
            from memsdk.store.edge import EdgeTransport
            from memsdk.store.edge.shards import Shard
            from memsdk.types import Op, Scope

            alice = Scope(user_id="alice")
            bank = MemoryBank(EdgeTransport(sys.argv[1], dim=64, dedicate_after=2), HashEmbedder(64))
            for i in range(3):
                bank.apply(alice, [Op.add(f"fact {i}"), Op.add(f"turn {i}", tier="episodic")])
            assert len(bank.transport.dedicated()) == 2
            write = Shard.upsert
            def die_after_one(self, points):
                write(self, points)
                os._exit(9)
            Shard.upsert = die_after_one
            bank.apply(alice, [Op.add("the last fact"), Op.add("the last turn", tier="episodic")])
            """
        ), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == 9, child.stderr
    assert (tmp_path / "JOURNAL").exists()
    with open_bank(tmp_path, 2) as bank:
        texts = {r.text for r in bank.list(ALICE)}
        assert {"the last fact", "the last turn"} <= texts and len(texts) == 8
        assert len(bank.history(ALICE)) == 8  # each record with its ADD event
    assert not (tmp_path / "JOURNAL").exists()


def test_an_engine_error_part_way_is_finished_by_the_next_journalled_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsdk.store.edge.shards import Shard

    with open_bank(tmp_path, 2) as bank:
        for i in range(2):
            bank.apply(ALICE, [Op.add(f"fact {i}"), Op.add(f"turn {i}", tier="episodic")])
        assert len(bank.transport.dedicated()) == 2  # type: ignore[attr-defined]
        write, calls = Shard.upsert, []

        def second_fails(self: Shard, points: list[Point]) -> None:
            calls.append(self.name)
            if len(calls) == 2:
                raise RuntimeError("disk full")
            write(self, points)

        monkeypatch.setattr(Shard, "upsert", second_fails)
        with pytest.raises(StoreError, match="disk full"):
            bank.apply(ALICE, [Op.add("half-written fact"), Op.add("half-written turn", tier="episodic")])
        monkeypatch.setattr(Shard, "upsert", write)
        assert (tmp_path / "JOURNAL").exists()
        bank.apply(ALICE, [Op.add("next fact"), Op.add("next turn", tier="episodic")])
        texts = {r.text for r in bank.list(ALICE)}
        assert {"half-written fact", "half-written turn", "next fact", "next turn"} <= texts and len(texts) == 8
        assert len(bank.history(ALICE)) == 8
    assert not (tmp_path / "JOURNAL").exists()


@pytest.mark.parametrize("dies", ["before the flip", "after the flip"])
def test_a_move_cut_short_by_a_kill_leaves_every_memory_once(tmp_path: Path, dies: str) -> None:
    """Before CURRENT names the new shard, the move never happened (its folder is removed on
    open); after, the shared shard's copies are deleted on open. Either way: once each."""
    patch = "shards.Shards._copy" if dies == "before the flip" else "durability.Layout.write"
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(
            f"""
            import os, sys
            from memsdk.bank import MemoryBank
            from memsdk.embedding import HashEmbedder
            from memsdk.store.edge import EdgeTransport, durability, shards
            from memsdk.types import Op, Scope

            bank = MemoryBank(EdgeTransport(sys.argv[1], dim=64, dedicate_after=4), HashEmbedder(64))
            for i in range(3):
                bank.apply(Scope(user_id="alice"), [Op.add(f"fact {{i}}")])
            step = {patch}
            def die_after(*args, **kwargs):
                step(*args, **kwargs)
                os._exit(9)
            {patch} = die_after
            bank.apply(Scope(user_id="alice"), [Op.add("fact 3")])
            """
        ), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == 9, child.stderr
    with open_bank(tmp_path, 4) as bank:
        assert sorted(r.text for r in bank.list(ALICE)) == [f"fact {i}" for i in range(4)]
        assert len(bank.history(ALICE)) == 4
        assert bank.transport.count(Where(ALICE.key, "memory")) == 4  # no copy counted twice
        moved = set(bank.transport.dedicated())  # type: ignore[attr-defined]
        assert moved == (set() if dies == "before the flip" else {SEMANTIC})
        shards = {p.name for p in tmp_path.glob("shard-*")}
        assert shards == Layout.read(tmp_path).names()  # type: ignore[union-attr]  # no stray folder


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_erasing_a_scope_with_its_own_shards_removes_them_and_its_bytes(tmp_path: Path) -> None:
    with open_bank(tmp_path, 3) as bank:
        for i in range(4):
            bank.apply(ALICE, [Op.add(f"Alice SSN ZX-ERASE-ME-{i}"), Op.add(f"she said ZX-ERASE-ME-{i}", tier="episodic")])
        bank.apply(BOB, [Op.add("Bob keeps KEEP-ME-552")])
        bank.transport.flush()  # type: ignore[attr-defined]
        assert len(bank.transport.dedicated()) == 2  # type: ignore[attr-defined]
        assert _files_containing(tmp_path, b"ZX-ERASE-ME-3")
        assert bank.delete_all(ALICE) == 8
        assert bank.transport.dedicated() == {}  # type: ignore[attr-defined]
    assert _files_containing(tmp_path, b"ZX-ERASE-ME") == []
    assert _files_containing(tmp_path, b"KEEP-ME-552")
    assert len(list(tmp_path.glob("shard-*"))) == 1
    with open_bank(tmp_path, 3) as bank:
        assert bank.count(ALICE, include_deleted=True) == 0 and [r.text for r in bank.list(BOB)] == ["Bob keeps KEEP-ME-552"]


def test_an_erase_cut_short_after_its_journal_is_finished_on_open(tmp_path: Path) -> None:
    """A kill right after an erase across shards was journalled: the next open deletes the
    scope from every shard and purges, so its text is gone from disk before any call."""
    from memsdk.bank import codec
    from memsdk.store.edge.durability import Journal

    with open_bank(tmp_path, 3) as bank:
        for i in range(4):
            bank.apply(ALICE, [Op.add(f"Alice SSN ZX-ERASE-ME-{i}"), Op.add(f"she said ZX-ERASE-ME-{i}", tier="episodic")])
        bank.apply(BOB, [Op.add("Bob keeps KEEP-ME-552")])
    Journal(tmp_path).write({"delete": encode_where(codec.scope_points(ALICE))})
    with open_bank(tmp_path, 3) as bank:
        assert bank.count(ALICE, include_deleted=True) == 0 and bank.history(ALICE) == []
        assert bank.transport.dedicated() == {}  # type: ignore[attr-defined]
        assert [r.text for r in bank.list(BOB)] == ["Bob keeps KEEP-ME-552"]
    assert _files_containing(tmp_path, b"ZX-ERASE-ME") == [] and not (tmp_path / "JOURNAL").exists()


def test_a_store_written_by_a_newer_memsdk_is_refused(tmp_path: Path) -> None:
    open_bank(tmp_path, None).close()
    meta = tmp_path / "memsdk-store.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 99}))
    with pytest.raises(StoreError, match="newer memsdk"):
        EdgeTransport(tmp_path, dim=DIM)
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 4}))
    open_bank(tmp_path, None).close()  # the refusal released the folder's lock


def test_journal_entries_round_trip_exactly() -> None:
    rng = np.random.default_rng(0)
    point = Point("p1", {"text": "é\u2028", "n": 2**53}, rng.standard_normal(DIM).astype(np.float32), Sparse((3, 9), (0.25, 1.0 / 3)))
    back = decode_point(json.loads(json.dumps(encode_point(point))))
    assert back.id == point.id and back.payload == point.payload and back.sparse == point.sparse
    assert back.vector is not None and point.vector is not None and back.vector.tobytes() == point.vector.tobytes()
    where = Where(ALICE.key, None, ids=frozenset({"b", "a"}), tier="episodic", content_hashes=frozenset({"h"}))
    assert decode_where(json.loads(json.dumps(encode_where(where)))) == where
