"""Storage transports behind one protocol, chosen by location like qdrant-client does.

    open_transport("/path/to/dir", dim=384)        embedded Qdrant engine (the default)
    open_transport(":memory:", dim=384)            in this process's memory (`InMemoryTransport`), ephemeral
    open_transport("http://qdrant:6333", dim=384)  a Qdrant server or cluster
"""

from __future__ import annotations

import os

from memsdk.store.base import Hit, Point, StoreTransport, Where
from memsdk.store.memory import InMemoryTransport

__all__ = ["Hit", "Point", "StoreTransport", "Where", "InMemoryTransport", "open_transport"]


def open_transport(location: str | os.PathLike[str], *, dim: int, api_key: str | None = None) -> StoreTransport:
    """The transport a location names: ``http(s)://...`` a Qdrant server (qdrant-client,
    with ``api_key``), ``":memory:"`` the in-memory transport (a dict and numpy: what forks
    run on, nothing on disk), any other path Qdrant's embedded engine in that folder. `StoreLocked` when another process holds the folder."""
    text = os.fspath(location)
    if text.startswith(("http://", "https://")):
        from memsdk.store.qdrant import QdrantClientTransport

        return QdrantClientTransport(url=text, api_key=api_key, dim=dim)
    if text == ":memory:":
        return InMemoryTransport(dim)
    from memsdk.store.edge import EdgeTransport

    return EdgeTransport(text, dim=dim)
