"""The store's on-disk format (memsdk-store.json) and the upgrade of a directory that an
older memsdk wrote, run on open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from memsdk.errors import StoreError
from memsdk.store.base import SCOPE_TIER_FIELD, group_by_scope_tier
from memsdk.store.edge.durability import atomic_write
from memsdk.store.edge.shards import PAGE, Shards

__all__ = ["FORMAT", "SPARSE_FORMAT", "check_meta", "migrate"]

#: the layout version in memsdk-store.json; 2 added the ``tier`` payload field, 3 the
#: `SCOPE_TIER_FIELD`, 4 dedicated shards (CURRENT as JSON)
FORMAT = 4
#: the first format with BM25 sparse vectors (tiers)
SPARSE_FORMAT = 2


def check_meta(root: Path, dim: int) -> int:
    """The store's format (this one's for a new store)."""
    meta_path = root / "memsdk-store.json"
    if not meta_path.exists():
        atomic_write(meta_path, json.dumps({"format": FORMAT, "dim": dim}))
        return FORMAT
    meta = json.loads(meta_path.read_text())
    if meta.get("dim") != dim:
        raise StoreError(
            f"{root} holds {meta.get('dim')}-d vectors but the embedder makes {dim}-d ones; "
            "open it with the embedder it was built with, or export and re-import"
        )
    found = int(meta.get("format", 1))
    if found > FORMAT:
        raise StoreError(f"{root} was written by a newer memsdk (store format {found}, this one reads up to {FORMAT}); upgrade memsdk to open it")
    return found


def migrate(shards: Shards, found: int) -> None:
    """Format 1 (before tiers) -> 2: every point gets ``tier: semantic``, then the shard is
    rebuilt (as `purge` does) with the tier index and the BM25 sparse vector config.
    Old memories have no BM25 vector, so hybrid search finds them by the dense half only
    until they are re-imported. 2 -> 3: every memory gets its `SCOPE_TIER_FIELD`, without
    which the BM25 IDF of its scope's searches would not count it. 3 -> 4: CURRENT is
    written as JSON. Each step is idempotent: a crash is finished next open."""
    if found >= FORMAT:
        return
    shared = shards.routes.shared.engine
    if found < SPARSE_FORMAT:
        shared.update(qe.UpdateOperation.set_payload_by_filter(qe.Filter(must=[qe.IsEmptyCondition("tier")]), {"tier": "semantic"}))
        shared.flush()
        shards.dirty.add(shards.routes.shared.name)
        shards.purge()
    _backfill_scope_tier(shards)
    shards.routes.layout.write(shards.root)
    meta_path = shards.root / "memsdk-store.json"
    atomic_write(meta_path, json.dumps({**json.loads(meta_path.read_text()), "format": FORMAT}))


def _backfill_scope_tier(shards: Shards) -> None:
    shared = shards.routes.shared.engine  # read here: the purge of a format-1 store replaced it
    missing = qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory")), qe.IsEmptyCondition(SCOPE_TIER_FIELD)])
    pairs: list[tuple[str, dict[str, Any]]] = []
    offset = None
    while True:  # read every page before the first write, so no write moves a page
        page, offset = shared.scroll(qe.ScrollRequest(offset=offset, limit=PAGE, filter=missing, with_payload=True, with_vector=False))
        pairs += [(str(r.id), dict(r.payload or {})) for r in page]
        if offset is None:
            break
    for key, ids in group_by_scope_tier(pairs).items():
        for i in range(0, len(ids), PAGE):
            batch: list[qe.PointId] = list(ids[i : i + PAGE])
            shared.update(qe.UpdateOperation.set_payload(batch, {SCOPE_TIER_FIELD: key}))
    shared.flush()
