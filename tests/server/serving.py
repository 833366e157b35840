"""Real `memsdk serve` apps under uvicorn on loopback ports, in threads of the test process.

Heuristic policies and the hashing embedder: the tests that use them are about HTTP, keys
and tenants, not about what a policy decides. Keys: three tenants, the first an admin, plus
a revoked key. `Servers` is used by the ``serve`` fixture (tests/server/conftest.py) and by
the LangGraph store contract, which runs the store over a remote client too.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder

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
    from memsdk.server import hash_key

    rows = [{"sha256": hash_key(k), "tenant": t, "admin": t == admin} for k, t in tenants.items()]
    rows.append({"sha256": hash_key(REVOKED), "tenant": "alpha", "revoked": True})
    path.write_text(json.dumps({"keys": rows}))
    return path


class Servers:
    """Starts servers under ``root`` (`start`); `stop_all` stops them and closes their clients."""

    def __init__(self, root: Path) -> None:
        self.root, self.started = root, []

    def start(self, tenants: dict[str, str] = KEYS, limits: Any = None, telemetry: Any = None, embedder: Any = None) -> Served:
        import uvicorn

        from memsdk.server import Keyring, ServerLimits, create_app

        n = len(self.started)
        client = MemoryClient(data_dir=self.root / f"data-{n}", embedder=embedder or HashEmbedder(64), policies="heuristic", telemetry=telemetry)
        keys = Keyring.from_file(keys_file(self.root / f"keys-{n}.json", tenants))
        app = create_app(client, keys, limits=limits or ServerLimits(), telemetry=telemetry)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not (server.started and server.servers):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        self.started.append((server, thread, client))
        return Served(f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}", client)

    def stop_all(self) -> None:
        for server, thread, client in self.started:
            server.should_exit = True
            thread.join(timeout=10)
            client.close()
