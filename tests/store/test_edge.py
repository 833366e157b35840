"""What only the embedded engine must do: lock its folder, survive kill -9, erase for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.errors import StoreError, StoreLocked
from memsdk.store.edge import EdgeTransport
from memsdk.types import Op, Scope

DIM = 64
ALICE = Scope(user_id="alice")


def open_bank(path: Path) -> MemoryBank:
    return MemoryBank(EdgeTransport(path, dim=DIM), HashEmbedder(DIM))


def run_child(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_second_process_gets_store_locked_with_an_explanation(tmp_path: Path) -> None:
    with open_bank(tmp_path):
        child = run_child(
            """
            import sys
            from memsdk.store.edge import EdgeTransport
            from memsdk.errors import StoreLocked
            try:
                EdgeTransport(sys.argv[1], dim=64)
            except StoreLocked as exc:
                print("LOCKED:", exc)
            """,
            str(tmp_path),
        )
        out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.startswith("LOCKED:")
    assert f"pid {os.getpid()}" in out and "qdrant_url" in out


def test_second_open_in_the_same_process_is_locked_until_close(tmp_path: Path) -> None:
    first = open_bank(tmp_path)
    with pytest.raises(StoreLocked):
        open_bank(tmp_path)
    first.close()
    open_bank(tmp_path).close()


def test_wrong_embedding_size_is_explained(tmp_path: Path) -> None:
    open_bank(tmp_path).close()
    with pytest.raises(StoreError, match="64-d vectors"):
        EdgeTransport(tmp_path, dim=384)
    open_bank(tmp_path).close()  # the failed open released the lock


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_erase_removes_the_bytes_from_disk(tmp_path: Path) -> None:
    bob = Scope(user_id="bob")
    with open_bank(tmp_path) as bank:
        t = bank.apply(ALICE, [Op.add("Alice SSN ZX-ERASE-ME-731")])
        bank.apply(ALICE, [Op.update(t.records[0].id, "Alice SSN ZX-ERASE-ME-731 (confirmed)")])
        bank.apply(bob, [Op.add("Bob keeps KEEP-ME-552")])
        bank.transport.flush()
        assert _files_containing(tmp_path, b"ZX-ERASE-ME-731"), "the test needle must be on disk first"
        bank.delete_all(ALICE)
    assert _files_containing(tmp_path, b"ZX-ERASE-ME-731") == []
    assert _files_containing(tmp_path, b"KEEP-ME-552")
    with open_bank(tmp_path) as bank:
        assert bank.count(ALICE, include_deleted=True) == 0
        assert [r.text for r in bank.list(bob)] == ["Bob keeps KEEP-ME-552"]
        bank.apply(bob, [Op.add("still writable after the shard swap")])
        assert bank.count(bob) == 2


def test_stale_shard_folders_are_removed_on_open(tmp_path: Path) -> None:
    open_bank(tmp_path).close()
    leftover = tmp_path / "shard-9"  # e.g. a purge that crashed before flipping CURRENT
    leftover.mkdir()
    (leftover / "junk").write_text("secret")
    open_bank(tmp_path).close()
    assert not leftover.exists()


@pytest.mark.parametrize("dedicate_after", [None, 12], ids=["shared", "dedicated"])
def test_kill_9_loses_no_acknowledged_batch_and_splits_none(tmp_path: Path, dedicate_after: int | None) -> None:
    """Each batch writes both tiers. With ``dedicate_after`` 12, each tier moves to a shard of
    its own after a few batches, so later batches span two shards (the journal's case) and
    the kill may land in a move."""
    child = run_child(
        """
        import sys
        from memsdk.bank import MemoryBank
        from memsdk.embedding import HashEmbedder
        from memsdk.store.edge import EdgeTransport
        from memsdk.types import Op, Scope
        dedicate_after = None if sys.argv[2] == "None" else int(sys.argv[2])
        bank = MemoryBank(EdgeTransport(sys.argv[1], dim=64, dedicate_after=dedicate_after), HashEmbedder(64))
        scope = Scope(user_id="alice")
        first = bank.apply(scope, [Op.add("seed memory")]).records[0].id
        n = 0
        while True:
            turn = Op.add(f"batch {n} turn", tier="episodic")
            bank.apply(scope, [Op.add(f"batch {n} item {i}") for i in range(5)] + [turn, Op.update(first, f"seed memory v{n}")])
            n += 1
            print(n, flush=True)
        """,
        str(tmp_path),
        str(dedicate_after),
    )
    acknowledged = 0
    deadline = time.monotonic() + 60
    while acknowledged < 20 and time.monotonic() < deadline:
        acknowledged = int(child.stdout.readline() or acknowledged)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert acknowledged >= 20, child.stderr.read()

    with MemoryBank(EdgeTransport(tmp_path, dim=DIM, dedicate_after=dedicate_after), HashEmbedder(DIM)) as bank:
        records = bank.list(ALICE)
        history = bank.history(ALICE)
        batches = len(records) - 1
        assert batches % 6 == 0, "a batch was split by the crash"
        assert batches // 6 >= acknowledged, "an acknowledged batch was lost"
        assert len(bank.list(ALICE, tier="episodic")) == batches // 6, "a batch lost its turn"
        seed = next(r for r in records if r.text.startswith("seed"))
        assert seed.version == batches // 6 + 1  # every committed batch also committed its UPDATE
        assert len(history) == len(records) + batches // 6  # one ADD per record + one UPDATE per batch
        assert {e.memory_id for e in history} == {r.id for r in records}
        if dedicate_after is not None:
            assert len(bank.transport.dedicated()) == 2  # type: ignore[attr-defined]


def test_store_meta_records_the_vector_size(tmp_path: Path) -> None:
    open_bank(tmp_path).close()
    assert json.loads((tmp_path / "memsdk-store.json").read_text())["dim"] == DIM


def test_index_build_runs_in_the_background_and_search_stays_right(tmp_path: Path) -> None:
    # At this size Qdrant keeps the segment plain (its indexing threshold is in MB); the
    # benchmark shows the HNSW build at 100k. Here: the build starts, runs beside searches
    # and writes, and close() waits for it.
    import numpy as np

    from memsdk.store.base import Point, Where

    transport = EdgeTransport(tmp_path, dim=DIM, index_after=300)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    payload = {"scope_key": "s", "kind": "memory", "state": "live"}
    transport.upsert([Point(f"00000000-0000-0000-0000-{i:012d}", payload, vectors[i]) for i in range(400)])
    assert transport._routes.shared.indexer is not None, "crossing index_after starts a build"
    hits = transport.search(vectors[123], Where(scope_key="s", kind="memory"), 1)  # while it may still run
    assert hits[0].point.id.endswith("000000000123")
    transport.upsert([Point("00000000-0000-0000-0001-000000000000", payload, vectors[0])])  # writes go on meanwhile
    indexer = transport._routes.shared.indexer
    transport.wait_for_index()
    assert not indexer.is_alive() and transport._routes.shared.indexer is None
    assert transport.search(vectors[7], Where(scope_key="s", kind="memory"), 1)[0].point.id.endswith("000000000007")
    transport.close()


def test_a_store_from_before_tiers_is_migrated_on_open(tmp_path: Path) -> None:
    """Format 1 (no tier field, no BM25 vectors) opens as format 2 with nothing lost."""
    import json

    import qdrant_edge as qe

    from memsdk.bank import MemoryBank, codec
    from memsdk.embedding import HashEmbedder
    from memsdk.store.edge import FORMAT
    from memsdk.types import Op, Scope

    root, scope, embedder = tmp_path / "old", Scope(user_id="ann"), HashEmbedder(64)
    with MemoryBank(EdgeTransport(tmp_path / "new", dim=64), embedder) as donor:  # records as format 1 wrote them
        transition = donor.apply(scope, [Op.add("Ann keeps bees in Lyon")])
    (record,), (event,) = transition.records, transition.events
    old_payload = {k: v for k, v in codec.record_point(record, embedder.embed([record.text])[0]).payload.items() if k not in ("tier", "speaker", "occurred_at")}
    event_payload = {k: v for k, v in codec.event_point(event).payload.items() if k != "tier"}
    root.mkdir()
    (root / "memsdk-store.json").write_text(json.dumps({"format": 1, "dim": 64}))
    (root / "CURRENT").write_text("shard-1")
    shard = qe.EdgeShard.create(str(root / "shard-1"), qe.EdgeConfig(vectors={"text": qe.EdgeVectorParams(size=64, distance=qe.Distance.Cosine)}))
    shard.update(qe.UpdateOperation.upsert_points([
        qe.Point(str(record.id), {"text": embedder.embed([record.text])[0].tolist()}, old_payload),
        qe.Point(str(event.id), {}, event_payload),
    ]))
    shard.flush()
    shard.close()

    with MemoryBank(EdgeTransport(root, dim=64), embedder) as bank:
        (migrated,) = bank.list(scope)
        assert (migrated.id, migrated.text, migrated.tier) == (record.id, record.text, "semantic")
        assert [e.tier for e in bank.history(scope)] == ["semantic"]
        assert bank.list(scope, tier="semantic") == [migrated]
        bank.apply(scope, [Op.add("Ann's hives produce lavender honey")])
        assert bank.search(scope, "lavender honey", limit=1, hybrid=True)[0].record.text == "Ann's hives produce lavender honey"
        assert {h.record.id for h in bank.search(scope, "bees", limit=2, hybrid=True)} >= {record.id}  # by its dense half
    assert json.loads((root / "memsdk-store.json").read_text())["format"] == FORMAT
    assert sorted(p.name for p in root.glob("shard-*")) == ["shard-2"]  # rebuilt once, old shard removed


def test_a_store_from_before_an_index_gets_it_on_open(tmp_path: Path) -> None:
    """A shard written before ``scope.run_id`` was indexed is indexed on open, from the payload
    its records already hold; nothing is rewritten, and the conversation filter finds them."""
    import qdrant_edge as qe

    from memsdk.bank import MemoryBank
    from memsdk.embedding import HashEmbedder
    from memsdk.store.base import INDEXED_FIELDS, RUN_ID_FIELD
    from memsdk.types import Op, Scope

    ann, ben = Scope(user_id="ann", run_id="c1"), Scope(user_id="ben", run_id="c1")
    with MemoryBank(EdgeTransport(tmp_path, dim=64), HashEmbedder(64)) as bank:
        bank.apply(ann, [Op.add("Ann keeps bees")])
        bank.apply(ben, [Op.add("Ben keeps goats")])
        transport = bank.transport
        assert isinstance(transport, EdgeTransport)
        transport._routes.shared.engine.update(qe.UpdateOperation.delete_field_index(RUN_ID_FIELD))
        assert RUN_ID_FIELD not in transport._routes.shared.engine.info().payload_schema
    reopened = EdgeTransport(tmp_path, dim=64)
    try:
        schema = reopened._routes.shared.engine.info().payload_schema
        assert set(INDEXED_FIELDS) <= set(schema) and schema[RUN_ID_FIELD].points == 4  # two records, their two events
        assert sorted(reopened.scope_keys(10, run_id="c1")) == sorted([ann.key, ben.key])
    finally:
        reopened.close()


def test_a_store_from_before_the_scope_tier_key_gets_it_on_open(tmp_path: Path) -> None:
    """Format 2 memories lack `SCOPE_TIER_FIELD`, so a tier's BM25 IDF would not count them:
    opened as format 3, each memory gets its key (events none), and nothing else changes."""
    from memsdk.store.base import SCOPE_TIER_FIELD, Where, scope_tier_key
    from memsdk.store.edge import FORMAT

    root = tmp_path / "store"
    with open_bank(root) as bank:
        bank.apply(ALICE, [Op.add("Alice keeps bees", tier="semantic"), Op.add("Alice said hi", tier="episodic")])
        transport = bank.transport
        assert isinstance(transport, EdgeTransport)
        import qdrant_edge as qe

        transport._routes.shared.engine.update(qe.UpdateOperation.delete_payload_by_filter(qe.Filter(must=[]), [SCOPE_TIER_FIELD]))
        before = {r.id: r for r in bank.list(ALICE)}
    (root / "memsdk-store.json").write_text(json.dumps({"format": 2, "dim": DIM}))
    with open_bank(root) as bank:
        transport = bank.transport
        assert isinstance(transport, EdgeTransport)
        for tier in ("semantic", "episodic"):
            assert transport.count(Where(ALICE.key, None, scope_tier=scope_tier_key(ALICE.key, tier))) == 1
        assert transport.count(Where(ALICE.key, "event")) == 2 and transport.count(Where(ALICE.key, None)) == 4
        assert {r.id: r for r in bank.list(ALICE)} == before
        assert bank.search(ALICE, "bees", limit=1, tier="semantic", hybrid=True)[0].record.text == "Alice keeps bees"
    assert json.loads((root / "memsdk-store.json").read_text())["format"] == FORMAT
