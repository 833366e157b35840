"""Finishing what a kill or an engine error interrupted: the folders CURRENT does not name,
a journalled write across shards, and the deletes that end a move to a dedicated shard."""

from __future__ import annotations

import shutil
from pathlib import Path

import qdrant_edge as qe

from memsdk.store.edge.durability import Journal, Layout, decode_point, decode_where, shard_folders
from memsdk.store.edge.query import home_filter
from memsdk.store.edge.shards import Shards

__all__ = ["remove_stale_shards", "recover", "finish_journal"]


def remove_stale_shards(root: Path, layout: Layout) -> None:
    """Folders CURRENT does not name: a purge or a move that a kill cut short."""
    for child in shard_folders(root):
        if child.name not in layout.names():
            shutil.rmtree(child, ignore_errors=True)


def recover(journal: Journal, shards: Shards) -> None:
    """Finish what a kill interrupted: a journalled write, then the deletes that end a move
    to a dedicated shard (the copies it left in the shared shard; none, almost always)."""
    finish_journal(journal, shards)
    shared = shards.routes.shared.engine
    for key in shards.routes.dedicated:
        if shared.count(qe.CountRequest(exact=True, filter=home_filter(key))):
            shared.update(qe.UpdateOperation.delete_points_by_filter(home_filter(key)))
            shared.flush()


def finish_journal(journal: Journal, shards: Shards) -> None:
    """Apply the journalled write, if one is pending: after a kill, or after an engine error
    part-way through a write (before the next journalled write takes its place)."""
    entry = journal.read()
    if entry is None:
        return
    if "upsert" in entry:
        shards.write([decode_point(p) for p in entry["upsert"]])
    else:
        shards.delete(decode_where(entry["delete"]))
    for shard in shards.routes.all():
        shard.engine.flush()
    journal.clear()
    if "delete" in entry:  # a delete across shards is an erase, which a purge ends
        shards.purge()
