"""Which shard holds a scope's tier: the shared shard and the dedicated ones, opening them,
routing reads and writes to them, and the two changes of that layout (a scope tier moved
to a shard of its own, a purge), each a copy and one flip of CURRENT (`durability`).

**A shard per large scope tier.** Every scope starts in the shared shard, where a search
filters on its scope, and a hybrid search computes its BM25 IDF over the scope's tier
(`Where.corpus`). The engine computes such an IDF by visiting the corpus, so its cost grows
with the scope: +5 ms over dense at 100k memories in one scope. Once a (scope, tier) holds
``dedicate_after`` memories (10k) it moves to a shard of its own, as Qdrant server's tiered
multitenancy promotes a large tenant, and there the shard's own IDF statistics *are* the
scope's tier's, kept by the engine as it writes: no corpus to visit (README *Store
benchmark*). The history events of that scope and tier move with its memories, so a batch
within one tier stays one engine operation; a batch across shards goes through the journal.
A search over every tier of such a scope asks each of its shards and merges their hits by
score: each tier's BM25 IDF is then its own, which a search of one tier (the answer path,
the manager's lookup) always has.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from memsdk.errors import StoreError, StoreLocked
from memsdk.store.base import INDEXED_FIELDS, SCOPE_TIER_FIELD, SPARSE_NAME, VECTOR_NAME, Point, Where, scope_tier_key, split_scope_tier
from memsdk.store.edge.durability import Layout
from memsdk.store.edge.query import engine_filter, engine_point, home_filter

__all__ = ["PAGE", "DEDICATE_AFTER", "home", "Shard", "Routes", "Shards"]

PAGE = 1024
#: memories a (scope, tier) holds before it gets a shard of its own. In one shared shard the
#: hybrid p95 gap over dense is +0.57 ms for a scope of 10k and +5.01 for 100k (README *Store
#: benchmark*, quiet machine): inside the 2 ms target up to about here. A shard has its own WAL
#: and segment files to open and flush, so small scopes share one.
DEDICATE_AFTER = 10_000


def home(payload: dict[str, Any]) -> str | None:
    """The (scope, tier) key a point lives under: a memory's and its history events' alike
    (an event carries its record's tier). None for a point from before tiers."""
    tier = payload.get("tier")
    return None if tier is None else scope_tier_key(payload["scope_key"], tier)


def _tier_of(key: str, scope_key: str) -> str | None:
    """The tier of a (scope, tier) key when it belongs to ``scope_key``."""
    owner, tier = split_scope_tier(key)
    return tier if owner == scope_key else None


class Shard:
    """One engine shard: its folder's name, the engine handle, and its background HNSW build.

    Qdrant edge searches exactly until `optimize()` builds the HNSW index (about 24 ms at
    100k memories exact, under 3 ms indexed, on 2 cores). The transport starts that build in
    a background thread once ``index_after`` vectors have been written to a shard without one;
    searches and writes go on meanwhile (the engine is built for that), and `close()` waits for it.
    """

    def __init__(self, name: str, engine: qe.EdgeShard) -> None:
        self.name, self.engine = name, engine
        self.indexer: threading.Thread | None = None
        self.unindexed = 0
        self.count_unindexed()

    def count_unindexed(self) -> None:
        memories = self.engine.count(qe.CountRequest(exact=True, filter=qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory"))])))
        self.unindexed = max(0, memories - self.engine.info().indexed_vectors_count)

    def upsert(self, points: Sequence[Point]) -> None:
        self.engine.update(qe.UpdateOperation.upsert_points([engine_point(p) for p in points]))
        self.unindexed += sum(p.vector is not None for p in points)

    def maybe_index(self, index_after: int | None) -> None:
        if index_after is None or self.unindexed < index_after or (self.indexer is not None and self.indexer.is_alive()):
            return
        self.unindexed = 0
        self.indexer = threading.Thread(target=self.engine.optimize, name=f"memsdk-edge-index-{self.name}", daemon=True)
        self.indexer.start()

    def wait_for_index(self) -> None:
        if self.indexer is not None:
            self.indexer.join()
            self.indexer = None

    def pages(self, flt: qe.Filter | None = None) -> Iterator[list[qe.Point]]:
        """Every point (matching ``flt``) with its vectors, a page at a time: what a copy writes."""
        offset = None
        while True:
            page, offset = self.engine.scroll(qe.ScrollRequest(offset=offset, limit=PAGE, filter=flt, with_payload=True, with_vector=True))
            if page:
                yield [qe.Point(r.id, r.vector or {}, r.payload) for r in page]
            if offset is None:
                return

    def close(self) -> None:
        self.wait_for_index()
        self.engine.flush()
        self.engine.close()


@dataclass(frozen=True, eq=False)
class Routes:
    """The open shards, by what they hold. Replaced whole, never changed in place, so a read
    running beside a layout change sees one layout or the other."""

    shared: Shard
    dedicated: dict[str, Shard] = field(default_factory=dict)

    @property
    def layout(self) -> Layout:
        return Layout(self.shared.name, {key: s.name for key, s in self.dedicated.items()})

    def all(self) -> list[Shard]:
        return [self.shared, *self.dedicated.values()]

    def of(self, key: str | None) -> Shard:
        return self.shared if key is None else self.dedicated.get(key, self.shared)

    def targets(self, where: Where) -> list[tuple[Shard, qe.Filter]]:
        """The shards that can hold a point matching ``where`` (one when it names a tier), each
        with ``where`` as its filter: a dedicated shard's leaves out the scope it holds alone."""
        key = where.scope_tier or (None if where.tier is None else scope_tier_key(where.scope_key, where.tier))
        if key is not None:
            shard = self.of(key)
            return [(shard, engine_filter(where, scoped=shard is self.shared))]
        own = {tier: s for k, s in self.dedicated.items() if (tier := _tier_of(k, where.scope_key)) is not None}
        return [(self.shared, engine_filter(where, elsewhere=sorted(own))), *((s, engine_filter(where, scoped=False)) for s in own.values())]


class Shards:
    """The shards of one data directory, from `open` to `close`: ``routes`` says which is
    which, and only this class replaces it. Not thread-safe for writers, like the transport
    it serves; reads take ``routes`` once and may run beside a change."""

    #: set by `open`; None once closed
    routes: Routes

    def __init__(self, root: Path, dim: int, *, search_threads: int | None, index_after: int | None, dedicate_after: int | None) -> None:
        self.root = root
        self.dim = dim
        self._search_threads = search_threads
        self._index_after = index_after
        self._dedicate_after = dedicate_after
        #: memories each (scope, tier) of the shared shard holds, at most (counted exactly
        #: when first written in this process, then grown by each write)
        self._sizes: dict[str, int] = {}
        #: shards a delete touched since the last purge: what the next purge rewrites
        self.dirty: set[str] = set()

    def open(self, layout: Layout, *, sparse: bool) -> None:
        """Open the folders ``layout`` names; ``sparse`` as `_open_shard` takes it, for the shared one."""
        shared = self._open_shard(layout.shared, sparse=sparse)
        self.routes = Routes(shared, {key: self._open_shard(name) for key, name in layout.dedicated.items()})

    def flush(self) -> None:
        for shard in self.routes.all():
            shard.engine.flush()

    def close(self) -> None:
        for shard in self.routes.all():
            shard.close()
        self.routes = None  # type: ignore[assignment]

    def _config(self, *, sparse: bool = True) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={VECTOR_NAME: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None,
            max_search_threads=self._search_threads,
        )

    def _open_shard(self, name: str, *, sparse: bool = True, fresh: bool = False) -> Shard:
        """Load the folder ``name`` (``fresh``: create it anew, removing any leftover there).
        ``sparse`` False only for a format-1 shard, which `migration.migrate` rebuilds with them."""
        path = self.root / name
        if fresh:
            shutil.rmtree(path, ignore_errors=True)
        try:
            if (path / "edge_config.json").exists():
                engine = qe.EdgeShard.load(str(path), self._config(sparse=sparse))
            else:
                engine = qe.EdgeShard.create(str(path), self._config())
            # on a loaded shard too: one written before a field was indexed gets its index here
            # (built from the payload every record already holds, so nothing is rewritten)
            indexed = engine.info().payload_schema
            for field_name in INDEXED_FIELDS:
                if field_name not in indexed:
                    params = qe.KeywordIndexParams(is_tenant=field_name == "scope_key")
                    engine.update(qe.UpdateOperation.create_field_index(field_name, params))
            return Shard(name, engine)
        except Exception as exc:  # the engine raises bare Exception with a Rust message
            if "WouldBlock" in str(exc):
                raise StoreLocked(f"{path} is locked by another Qdrant engine instance") from exc
            raise StoreError(f"cannot open the embedded store at {path}: {exc}") from exc

    # -- writes ---------------------------------------------------------------------------

    def write(self, points: Sequence[Point]) -> None:
        routes = self.routes
        groups: dict[str, list[Point]] = {}
        for p in points:
            groups.setdefault(routes.of(home(p.payload)).name, []).append(p)
        for shard in routes.all():
            if shard.name in groups:
                shard.upsert(groups[shard.name])

    def delete(self, where: Where) -> None:
        for shard, flt in self.routes.targets(where):
            shard.engine.update(qe.UpdateOperation.delete_points_by_filter(flt))
            shard.engine.flush()
            self.dirty.add(shard.name)
        self._sizes.clear()  # recounted on the next write

    # -- dedicated shards -----------------------------------------------------------------

    def grow(self, points: Sequence[Point]) -> None:
        """Move each (scope, tier) of the shared shard that this write took past
        ``dedicate_after`` memories to a shard of its own."""
        if self._dedicate_after is None:
            return
        dedicated = self.routes.dedicated
        written = Counter(key for p in points if p.payload.get("kind") == "memory" and (key := home(p.payload)) is not None and key not in dedicated)
        for key, n in written.items():
            exact = key not in self._sizes
            # else an upper bound: an update rewrites a memory without adding one
            size = self._shared_size(key) if exact else self._sizes[key] + n
            if size >= self._dedicate_after and not exact:
                size = self._shared_size(key)
            if size >= self._dedicate_after:
                self.dedicate(key)
                continue
            self._sizes[key] = size

    def _shared_size(self, key: str) -> int:
        return self.routes.shared.engine.count(qe.CountRequest(exact=True, filter=qe.Filter(must=[qe.FieldCondition(key=SCOPE_TIER_FIELD, match=qe.MatchValue(key))])))

    def dedicate(self, key: str) -> None:
        """Move the memories and history events of one (scope, tier) (`scope_tier_key`) from
        the shared shard to a shard of their own. Copy, flip CURRENT (the commit point), then
        delete the copies from the shared shard; a kill before the flip leaves a folder the
        next open removes, one after it leaves copies the next open deletes."""
        routes = self.routes
        if key in routes.dedicated:
            return
        shared = routes.shared
        (name,) = routes.layout.fresh_names(1)
        own = self._copy(shared.pages(home_filter(key)), name)
        moved = Routes(shared, {**routes.dedicated, key: own})
        moved.layout.write(self.root)
        self.routes = moved  # from here no read looks for this tier in the shared shard
        shared.engine.update(qe.UpdateOperation.delete_points_by_filter(home_filter(key)))
        self._sizes.pop(key, None)
        own.maybe_index(self._index_after)

    def _copy(self, pages: Iterable[list[qe.Point]], name: str) -> Shard:
        """A fresh shard in the folder ``name`` holding ``pages``, flushed; nothing is left of
        it if the copy fails."""
        copy = self._open_shard(name, fresh=True)
        try:
            for page in pages:
                copy.engine.update(qe.UpdateOperation.upsert_points(page))
            copy.engine.flush()
        except BaseException:
            copy.engine.close()
            shutil.rmtree(self.root / name, ignore_errors=True)
            raise
        copy.count_unindexed()
        return copy

    # -- purge ----------------------------------------------------------------------------

    def purge(self) -> None:
        """`EdgeTransport.purge`: the live points of each dirty shard copied into a fresh folder,
        CURRENT flipped once for all of them, then the old folders removed."""
        self.wait_for_index()
        routes = self.routes
        stale = [s for s in routes.all() if s.name in self.dirty]
        if not stale:
            return
        copies: dict[str, Shard] = {}
        try:
            for shard, name in zip(stale, routes.layout.fresh_names(len(stale))):
                copies[shard.name] = self._copy(shard.pages(), name)
        except BaseException:
            for copy in copies.values():
                copy.engine.close()
                shutil.rmtree(self.root / copy.name, ignore_errors=True)
            raise
        empty = {key for key, s in routes.dedicated.items() if s.name in copies and not _has_points(copies[s.name])}
        rewritten = Routes(
            copies.get(routes.shared.name, routes.shared),
            {key: copies.get(s.name, s) for key, s in routes.dedicated.items() if key not in empty},
        )
        rewritten.layout.write(self.root)
        self.routes = rewritten
        self.dirty.clear()
        for shard in stale:
            shard.engine.close()
            shutil.rmtree(self.root / shard.name, ignore_errors=True)
        for key in empty:
            dropped = copies[routes.dedicated[key].name]
            dropped.engine.close()
            shutil.rmtree(self.root / dropped.name, ignore_errors=True)

    # -- background indexing --------------------------------------------------------------

    def maybe_index(self) -> None:
        """Start the HNSW build of each shard that has ``index_after`` vectors without one."""
        for shard in self.routes.all():
            shard.maybe_index(self._index_after)

    def wait_for_index(self) -> None:
        for shard in self.routes.all():
            shard.wait_for_index()

    def optimize(self) -> None:
        for shard in self.routes.all():
            shard.wait_for_index()
            shard.engine.optimize()
            shard.unindexed = 0


def _has_points(shard: Shard) -> bool:
    return shard.engine.count(qe.CountRequest(exact=True)) > 0
