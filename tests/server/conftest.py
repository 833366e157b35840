"""A real `memsdk serve` app under uvicorn on a loopback port, in a thread of the test process.

Heuristic policies and the hashing embedder: these tests are about HTTP, keys and tenants,
not about what a policy decides. Keys: three tenants, the first an admin, plus a revoked key.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
import uvicorn  # noqa: E402

from memsdk import MemoryClient  # noqa: E402
from memsdk.embedding import HashEmbedder  # noqa: E402
from memsdk.server import Keyring, ServerLimits, create_app, hash_key  # noqa: E402

KEYS = {"key-alpha": "alpha", "key-beta": "beta", "key-gamma": "gamma"}
REVOKED = "key-revoked"


@dataclass
class Served:
    url: str
    client: MemoryClient

    def http(self, key: str | None = "key-alpha") -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def keys_file(path: Path, tenants: dict[str, str], *, admin: str = "alpha") -> Path:
    rows = [{"sha256": hash_key(k), "tenant": t, "admin": t == admin} for k, t in tenants.items()]
    rows.append({"sha256": hash_key(REVOKED), "tenant": "alpha", "revoked": True})
    path.write_text(json.dumps({"keys": rows}))
    return path


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """``serve(tenants=..., limits=...)`` starts a server and returns a `Served`; every one is stopped after the test."""
    started: list[tuple[uvicorn.Server, threading.Thread, MemoryClient]] = []

    def start(tenants: dict[str, str] = KEYS, limits: ServerLimits = ServerLimits(), telemetry: Any = None) -> Served:
        client = MemoryClient(data_dir=tmp_path / f"data-{len(started)}", embedder=HashEmbedder(64), policies="heuristic", telemetry=telemetry)
        keys = Keyring.from_file(keys_file(tmp_path / f"keys-{len(started)}.json", tenants))
        config = uvicorn.Config(create_app(client, keys, limits=limits, telemetry=telemetry), host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not (server.started and server.servers):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        started.append((server, thread, client))
        return Served(f"http://127.0.0.1:{port}", client)

    yield start
    for server, thread, client in started:
        server.should_exit = True
        thread.join(timeout=10)
        client.close()
