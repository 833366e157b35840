"""The embedded store's two small files beside its shard folders, ``CURRENT`` and
``JOURNAL``, and the atomic write both are made with: what makes a change of the shards
survive a kill whole.

**Why a CURRENT pointer.** Qdrant keeps deleted payloads in its WAL and segment pages until
they are rewritten, so "erase" alone would leave a user's text on disk. `purge()` copies the
live points of every shard a delete touched into fresh folders, flips CURRENT once, and
removes the old folders; a crash at any point leaves either the old or the new layout
current, and folders it does not name are removed on the next open. Moving a scope tier to
its own shard is the same kind of step: copy, flip CURRENT, then delete the copies from the
shared shard (redone on open if a kill came first).

``CURRENT`` says which folder holds what: the shared shard, and the shard each large
(scope, tier) has to itself. It is the one commit point of every change of layout (a purge,
a tenant moved to a shard of its own): written whole to a temporary file, fsynced, renamed
over the old one. A store written before dedicated shards holds the shared folder's name as
plain text, which still reads.

``JOURNAL`` makes a write that spans shards all-or-nothing. Each engine shard has a WAL of
its own, so a batch whose points live in two shards would be two engine operations, and a
kill between them would split it. The transport writes the whole batch here first (the
same temporary-file, fsync, rename), then to each shard, then removes the file; the next
open replays a journal it finds, and every entry is idempotent (an upsert of the same ids,
a delete by the same filter). A write that stays in one shard never touches it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memsdk.store.base import Point, Sparse, Where

__all__ = ["Layout", "Journal", "atomic_write", "encode_point", "decode_point", "encode_where", "decode_where", "shard_folders"]

SHARD_PREFIX = "shard-"


@dataclass(frozen=True)
class Layout:
    """Folder names: ``shared`` holds every scope's points but those of the (scope, tier) keys
    in ``dedicated`` (`memsdk.store.base.scope_tier_key` -> folder), which have a shard each."""

    shared: str
    dedicated: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, root: Path) -> Layout | None:
        path = root / "CURRENT"
        if not path.exists():
            return None
        text = path.read_text().strip()
        if not text.startswith("{"):  # format 3 and before: the one shard's name
            return cls(shared=text)
        data = json.loads(text)
        return cls(shared=data["shared"], dedicated=dict(data.get("dedicated", {})))

    def write(self, root: Path) -> None:
        atomic_write(root / "CURRENT", json.dumps({"shared": self.shared, "dedicated": dict(self.dedicated)}, sort_keys=True))

    def names(self) -> set[str]:
        return {self.shared, *self.dedicated.values()}

    def fresh_names(self, count: int) -> list[str]:
        """``count`` folder names no shard of this layout uses, numbered after the highest."""
        top = max(int(name.removeprefix(SHARD_PREFIX)) for name in self.names())
        return [f"{SHARD_PREFIX}{top + i}" for i in range(1, count + 1)]


class Journal:
    """At most one pending multi-shard write: the transport's writes are serialised by the
    bank (`MemoryBank`'s store lock), so a second never starts before the first is done."""

    def __init__(self, root: Path) -> None:
        self.path = root / "JOURNAL"

    def write(self, entry: Mapping[str, Any]) -> None:
        atomic_write(self.path, json.dumps(entry))

    def read(self) -> dict[str, Any] | None:
        """The pending entry, if a write was interrupted after it was journalled. A temporary
        file alone is a journal that was never complete: nothing of its write was applied."""
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)
        if not self.path.exists():
            return None
        entry: dict[str, Any] = json.loads(self.path.read_text())
        return entry

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def encode_point(p: Point) -> dict[str, Any]:
    """A point as JSON; float32 -> float64 -> float32 is exact, so a replay writes the same vector."""
    return {
        "id": p.id,
        "payload": p.payload,
        "vector": None if p.vector is None else p.vector.astype(np.float32).tolist(),
        "sparse": None if p.sparse is None else {"indices": list(p.sparse.indices), "values": list(p.sparse.values)},
    }


def decode_point(data: Mapping[str, Any]) -> Point:
    vector = None if data["vector"] is None else np.asarray(data["vector"], dtype=np.float32)
    sparse = None if data["sparse"] is None else Sparse(tuple(data["sparse"]["indices"]), tuple(data["sparse"]["values"]))
    return Point(data["id"], data["payload"], vector, sparse)


_SETS = ("ids", "content_hashes", "context_hashes", "turn_ids")


def encode_where(where: Where) -> dict[str, Any]:
    fields = {name: getattr(where, name) for name in Where.__dataclass_fields__}
    return {k: sorted(v) if k in _SETS and v is not None else v for k, v in fields.items()}


def decode_where(data: Mapping[str, Any]) -> Where:
    fields: dict[str, Any] = {k: frozenset(v) if k in _SETS and v is not None else v for k, v in data.items()}
    return Where(**fields)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def shard_folders(root: Path) -> Iterable[Path]:
    return root.glob(f"{SHARD_PREFIX}*")
