"""The embedded default: Qdrant's own engine in-process (qdrant-edge-py), under a data directory.

Layout of the directory::

    LOCK        locked while open (flock; LockFileEx on Windows): one process (one client) per directory (`lock.DirLock`)
    CURRENT     which shard folder holds what (`durability.Layout`), replaced atomically
    JOURNAL     a write that spans shards, while it is applied (`durability.Journal`)
    shard-N/    Qdrant edge shards (segments + WAL): one shared, one per large scope tier (`shards`)

`transport` holds `EdgeTransport`, which composes the rest: `shards` (which shard holds a
scope tier; moving a large one to its own shard; purge), `query` (memsdk's filters, points
and searches as the engine's types), `durability` (CURRENT, JOURNAL, atomic writes),
`recovery` (finishing on open what a kill cut short), `migration` (the format versions and
upgrading an older directory) and `lock`.
"""

from __future__ import annotations

from memsdk.store.edge.migration import FORMAT
from memsdk.store.edge.shards import DEDICATE_AFTER
from memsdk.store.edge.transport import EdgeTransport

__all__ = ["EdgeTransport", "DEDICATE_AFTER", "FORMAT"]
