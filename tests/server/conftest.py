"""The ``serve`` fixture: real `memsdk serve` apps on loopback ports (`tests.server.serving`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from tests.server.serving import KEYS, REVOKED, Served, Servers  # noqa: E402

__all__ = ["KEYS", "REVOKED", "Served"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """``serve(tenants=..., limits=..., telemetry=..., embedder=...)`` starts a server and returns a
    `Served`; every one is stopped after the test."""
    servers = Servers(tmp_path)
    yield servers.start
    servers.stop_all()
