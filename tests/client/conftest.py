"""Clients on a temporary data dir with the hashing embedder: fast, no model loaded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder

from tests.policies.conftest import ScriptedBackend  # noqa: F401  (re-exported for the client tests)


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator:
    opened: list[MemoryClient] = []

    def make(**kw) -> MemoryClient:
        kw.setdefault("data_dir", tmp_path / "data")
        kw.setdefault("embedder", HashEmbedder(64))
        if "backend" not in kw:
            kw.setdefault("policies", "heuristic")
        client = MemoryClient(**kw)
        opened.append(client)
        return client

    yield make
    for c in opened:
        c.close()


CAROLINE = {"user_id": "caroline", "run_id": "chat-1"}
MELANIE = {"user_id": "melanie", "run_id": "chat-1"}
