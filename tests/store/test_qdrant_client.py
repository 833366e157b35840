"""What only the qdrant-client transport must do on open: bring an existing collection's
points up to today's payload (a server collection has no format number to migrate by)."""

from __future__ import annotations

from pathlib import Path

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.store.base import SCOPE_TIER_FIELD, Where, scope_tier_key
from memsdk.store.qdrant import QdrantClientTransport
from memsdk.types import Op, Scope

DIM = 64
ALICE = Scope(user_id="alice")


def test_memories_from_before_the_scope_tier_key_get_it_on_open(tmp_path: Path) -> None:
    from qdrant_client import models as m

    def open_bank() -> MemoryBank:
        return MemoryBank(QdrantClientTransport(path=str(tmp_path), dim=DIM), HashEmbedder(DIM))

    with open_bank() as bank:
        bank.apply(ALICE, [Op.add("Alice keeps bees", tier="semantic"), Op.add("Alice said hi", tier="episodic")])
        transport = bank.transport
        assert isinstance(transport, QdrantClientTransport)
        transport._client.delete_payload(transport.collection, [SCOPE_TIER_FIELD], points=m.Filter(must=[]))
        assert transport.count(Where(ALICE.key, None, scope_tier=scope_tier_key(ALICE.key, "semantic"))) == 0
        before = {r.id: r for r in bank.list(ALICE)}
    with open_bank() as bank:
        for tier in ("semantic", "episodic"):
            assert bank.transport.count(Where(ALICE.key, None, scope_tier=scope_tier_key(ALICE.key, tier))) == 1
        assert bank.transport.count(Where(ALICE.key, "event")) == 2  # events carry no tier, so no key
        assert {r.id: r for r in bank.list(ALICE)} == before
        assert bank.search(ALICE, "bees", limit=1, tier="semantic", hybrid=True)[0].record.text == "Alice keeps bees"


def test_open_transport_picks_the_transport_its_location_names(tmp_path) -> None:
    from memsdk.store import InMemoryTransport, open_transport
    from memsdk.store.edge import EdgeTransport

    assert type(open_transport(":memory:", dim=8)) is InMemoryTransport  # not qdrant-client's local mode
    on_disk = open_transport(tmp_path / "store", dim=8)
    try:
        assert type(on_disk) is EdgeTransport
    finally:
        on_disk.close()
