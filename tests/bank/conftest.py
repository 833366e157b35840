"""Every bank test runs against every transport: one contract, several engines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.store import InMemoryTransport, StoreTransport
from memsdk.types import Scope

DIM = 64


@dataclass
class Engine:
    name: str
    make: Callable[[Path], StoreTransport]
    persistent: bool


def _edge(path: Path) -> StoreTransport:
    from memsdk.store.edge import EdgeTransport

    return EdgeTransport(path / "edge", dim=DIM)


def _edge_dedicated(path: Path) -> StoreTransport:
    """The embedded engine with a tiny ``dedicate_after``: a scope's tier moves to a shard of
    its own at its third memory, so every contract runs over shared and dedicated shards
    together, and across a move (the layout a scope of 10k memories has)."""
    from memsdk.store.edge import EdgeTransport

    return EdgeTransport(path / "edge", dim=DIM, dedicate_after=3)


def _qdrant_memory(path: Path) -> StoreTransport:
    from memsdk.store.qdrant import QdrantClientTransport

    return QdrantClientTransport(":memory:", dim=DIM)


def _qdrant_path(path: Path) -> StoreTransport:
    from memsdk.store.qdrant import QdrantClientTransport

    return QdrantClientTransport(path=str(path / "qdrant"), dim=DIM)


ENGINES = [
    Engine("in-memory", lambda path: InMemoryTransport(DIM), persistent=False),
    Engine("edge", _edge, persistent=True),
    Engine("edge-dedicated", _edge_dedicated, persistent=True),
    Engine("qdrant-memory", _qdrant_memory, persistent=False),
    Engine("qdrant-path", _qdrant_path, persistent=True),
]


@pytest.fixture(params=ENGINES, ids=[e.name for e in ENGINES])
def engine(request: pytest.FixtureRequest) -> Engine:
    return request.param


class BankFactory:
    """Opens a bank on the engine; `reopen()` closes it and opens the same storage again."""

    def __init__(self, engine: Engine, path: Path) -> None:
        self.engine, self.path = engine, path
        self.bank: MemoryBank | None = None

    def open(self) -> MemoryBank:
        self.bank = MemoryBank(self.engine.make(self.path), HashEmbedder(DIM))
        return self.bank

    def reopen(self) -> MemoryBank:
        if not self.engine.persistent:
            pytest.skip(f"{self.engine.name} does not persist")
        assert self.bank is not None
        self.bank.close()
        return self.open()


@pytest.fixture
def factory(engine: Engine, tmp_path: Path) -> Iterator[BankFactory]:
    f = BankFactory(engine, tmp_path)
    yield f
    if f.bank is not None:
        f.bank.close()


@pytest.fixture
def bank(factory: BankFactory) -> MemoryBank:
    return factory.open()


@pytest.fixture
def alice() -> Scope:
    return Scope(user_id="alice")


@pytest.fixture
def bob() -> Scope:
    return Scope(user_id="bob")
