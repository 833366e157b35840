"""The embedded default: Qdrant's own engine in-process (qdrant-edge-py), under a data directory.

Layout of the directory::

    LOCK        flock()ed while open: one process (one client) per directory
    CURRENT     which shard folder holds what (`edge_layout.Layout`), replaced atomically
    JOURNAL     a write that spans shards, while it is applied (`edge_layout.Journal`)
    shard-N/    Qdrant edge shards (segments + WAL): one shared, one per large scope tier

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

**Why a CURRENT pointer.** Qdrant keeps deleted payloads in its WAL and segment pages until
they are rewritten, so "erase" alone would leave a user's text on disk. `purge()` copies the
live points of every shard a delete touched into fresh folders, flips CURRENT once, and
removes the old folders; a crash at any point leaves either the old or the new layout
current, and folders it does not name are removed on the next open. Moving a scope tier to
its own shard is the same kind of step: copy, flip CURRENT, then delete the copies from the
shared shard (redone on open if a kill came first).

Qdrant edge searches exactly until `optimize()` builds the HNSW index (about 24 ms at
100k memories exact, under 3 ms indexed, on 2 cores). The transport starts that build in
a background thread once ``index_after`` vectors have been written to a shard without one;
searches and writes go on meanwhile (the engine is built for that), and `close()` waits for it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from memsdk.errors import StoreError, StoreLocked
from memsdk.store.base import (
    HASH_FIELDS, INDEXED_FIELDS, LEASE_TTL_S, LEASE_WAIT_S, RRF_K, RUN_ID_FIELD, SCOPE_TIER_FIELD, SPARSE_NAME, VECTOR_NAME, Hit, LocalLeases, Point, Sparse, Where,
    group_by_scope_tier, prefetch_limit, scope_tier_key, split_scope_tier,
)  # fmt: skip
from memsdk.store.edge_layout import Journal, Layout, atomic_write, decode_point, decode_where, encode_point, encode_where, shard_folders

__all__ = ["EdgeTransport", "DEDICATE_AFTER"]

_PAGE = 1024
#: the layout version in memsdk-store.json; 2 added the ``tier`` payload field, 3 the
#: `SCOPE_TIER_FIELD`, 4 dedicated shards (CURRENT as JSON)
FORMAT = 4
#: the first format with BM25 sparse vectors (tiers)
_SPARSE_FORMAT = 2
#: memories a (scope, tier) holds before it gets a shard of its own. In one shared shard the
#: hybrid p95 gap over dense is +0.57 ms for a scope of 10k and +5.01 for 100k (README *Store
#: benchmark*, quiet machine): inside the 2 ms target up to about here. A shard has its own WAL
#: and segment files to open and flush, so small scopes share one.
DEDICATE_AFTER = 10_000


def _scope_condition(where: Where) -> qe.FieldCondition:
    if where.scope_tier is not None:  # it implies the scope: one condition, not two
        return qe.FieldCondition(key=SCOPE_TIER_FIELD, match=qe.MatchValue(where.scope_tier))
    return qe.FieldCondition(key="scope_key", match=qe.MatchValue(where.scope_key))


def _filter(where: Where, *, scoped: bool = True, elsewhere: Sequence[str] = ()) -> qe.Filter:
    """``where`` as the engine's filter. ``scoped`` False leaves out the scope and tier, for a
    shard that holds only that scope's tier (`EdgeTransport.dedicate`): there every point
    matches them, and the engine would still check each condition on every candidate.
    ``elsewhere``: the scope's tiers that have shards of their own, which the shared shard's
    answer leaves out (copies a move has not deleted yet are never seen twice)."""
    must: list[Any] = [_scope_condition(where)] if scoped else []
    if where.kind is not None:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchValue(where.kind)))
    if where.ids is not None:
        must.append(qe.HasIdCondition(set(where.ids)))
    if (state := where.state) is not None:  # set exactly when `deleted` is
        must.append(qe.FieldCondition(key="state", match=qe.MatchValue(state)))
    if where.memory_id is not None:
        must.append(qe.FieldCondition(key="memory_id", match=qe.MatchValue(where.memory_id)))
    if where.tier is not None and scoped:
        must.append(qe.FieldCondition(key="tier", match=qe.MatchValue(where.tier)))
    for field_name, values in zip(HASH_FIELDS, (where.content_hashes, where.context_hashes)):
        if values is not None:
            must.append(qe.FieldCondition(key=field_name, match=qe.MatchAny(sorted(values))))
    if elsewhere:
        return qe.Filter(must=must, must_not=[qe.FieldCondition(key="tier", match=qe.MatchAny(sorted(elsewhere)))])
    return qe.Filter(must=must)


def _home(payload: dict[str, Any]) -> str | None:
    """The (scope, tier) key a point lives under: a memory's and its history events' alike
    (an event carries its record's tier). None for a point from before tiers."""
    tier = payload.get("tier")
    return None if tier is None else scope_tier_key(payload["scope_key"], tier)


def _tier_of(key: str, scope_key: str) -> str | None:
    """The tier of a (scope, tier) key when it belongs to ``scope_key``."""
    owner, tier = split_scope_tier(key)
    return tier if owner == scope_key else None


def _home_filter(key: str) -> qe.Filter:
    """Every point, memory or event, whose `_home` is ``key``."""
    scope_key, tier = split_scope_tier(key)
    return qe.Filter(must=[qe.FieldCondition(key="scope_key", match=qe.MatchValue(scope_key)), qe.FieldCondition(key="tier", match=qe.MatchValue(tier))])


def _point(rec: Any, with_vectors: bool) -> Point:
    vector = sparse = None
    if with_vectors and rec.vector and VECTOR_NAME in rec.vector:
        vector = np.asarray(rec.vector[VECTOR_NAME], dtype=np.float32)
    if with_vectors and rec.vector and SPARSE_NAME in rec.vector:
        sparse = Sparse.of(rec.vector[SPARSE_NAME])
    return Point(str(rec.id), dict(rec.payload or {}), vector, sparse)


def _engine_sparse(sparse: Sparse) -> qe.SparseVector:
    return qe.SparseVector(list(sparse.indices), list(sparse.values))


def _edge_point(p: Point) -> qe.Point:
    vector: dict[str, Any] = {} if p.vector is None else {VECTOR_NAME: p.vector.astype(np.float32).tolist()}
    if p.sparse is not None:
        vector[SPARSE_NAME] = _engine_sparse(p.sparse)
    return qe.Point(p.id, vector, p.payload)


class _DirLock:
    """An exclusive flock on ROOT/LOCK, held for the life of the transport."""

    def __init__(self, root: Path) -> None:
        self.path = root / "LOCK"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise StoreLocked(
                f"the data directory {root} is already open (held by pid {holder}). "
                "The embedded store allows one client per directory: close the other client, "
                "use another data_dir, or point every process at a Qdrant server (qdrant_url=...)."
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


class _Shard:
    """One engine shard: its folder's name, the engine handle, and its background HNSW build."""

    def __init__(self, name: str, engine: qe.EdgeShard) -> None:
        self.name, self.engine = name, engine
        self.indexer: threading.Thread | None = None
        self.unindexed = 0
        self.count_unindexed()

    def count_unindexed(self) -> None:
        memories = self.engine.count(qe.CountRequest(exact=True, filter=qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory"))])))
        self.unindexed = max(0, memories - self.engine.info().indexed_vectors_count)

    def upsert(self, points: Sequence[Point]) -> None:
        self.engine.update(qe.UpdateOperation.upsert_points([_edge_point(p) for p in points]))
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
            page, offset = self.engine.scroll(qe.ScrollRequest(offset=offset, limit=_PAGE, filter=flt, with_payload=True, with_vector=True))
            if page:
                yield [qe.Point(r.id, r.vector or {}, r.payload) for r in page]
            if offset is None:
                return

    def close(self) -> None:
        self.wait_for_index()
        self.engine.flush()
        self.engine.close()


@dataclass(frozen=True, eq=False)
class _Routes:
    """The open shards, by what they hold. Replaced whole, never changed in place, so a read
    running beside a layout change sees one layout or the other."""

    shared: _Shard
    dedicated: dict[str, _Shard] = field(default_factory=dict)

    @property
    def layout(self) -> Layout:
        return Layout(self.shared.name, {key: s.name for key, s in self.dedicated.items()})

    def all(self) -> list[_Shard]:
        return [self.shared, *self.dedicated.values()]

    def of(self, key: str | None) -> _Shard:
        return self.shared if key is None else self.dedicated.get(key, self.shared)

    def targets(self, where: Where) -> list[tuple[_Shard, qe.Filter]]:
        """The shards that can hold a point matching ``where`` (one when it names a tier), each
        with ``where`` as its filter: a dedicated shard's leaves out the scope it holds alone."""
        key = where.scope_tier or (None if where.tier is None else scope_tier_key(where.scope_key, where.tier))
        if key is not None:
            shard = self.of(key)
            return [(shard, _filter(where, scoped=shard is self.shared))]
        own = {tier: s for k, s in self.dedicated.items() if (tier := _tier_of(k, where.scope_key)) is not None}
        return [(self.shared, _filter(where, elsewhere=sorted(own))), *((s, _filter(where, scoped=False)) for s in own.values())]


class EdgeTransport:
    """Points in Qdrant edge shards. Not thread-safe for writers: `MemoryBank` serialises
    writes (its store lock); reads may run beside them."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        dim: int,
        *,
        search_threads: int | None = 1,
        index_after: int | None = 20_000,
        dedicate_after: int | None = DEDICATE_AFTER,
    ) -> None:
        """``dedicate_after``: memories a (scope, tier) holds before it moves to a shard of its
        own; None keeps every scope in the shared shard."""
        self.root = Path(path).expanduser()
        self.dim = dim
        self._search_threads = search_threads
        self._index_after = index_after
        self._dedicate_after = dedicate_after
        #: memories each (scope, tier) of the shared shard holds, at most (counted exactly
        #: when first written in this process, then grown by each write)
        self._sizes: dict[str, int] = {}
        #: shards a delete touched since the last purge: what the next purge rewrites
        self._dirty: set[str] = set()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _DirLock(self.root)
        self._leases = LocalLeases()  # the folder's flock makes this process its only writer
        self._journal = Journal(self.root)
        try:
            found = self._check_meta()
            layout = Layout.read(self.root)
            if layout is None:
                layout = Layout(shared="shard-1")
                layout.write(self.root)
            self._remove_stale_shards(layout)
            shared = self._open_shard(layout.shared, sparse=found >= _SPARSE_FORMAT)
            self._routes = _Routes(shared, {key: self._open_shard(name) for key, name in layout.dedicated.items()})
            self._migrate(found)
            self._recover()
        except BaseException:
            if getattr(self, "_routes", None) is not None:
                for shard in self._routes.all():
                    shard.engine.close()
            self._lock.release()
            raise

    # -- layout ---------------------------------------------------------------------------

    def _check_meta(self) -> int:
        """The store's format (this one's for a new store)."""
        meta_path = self.root / "memsdk-store.json"
        if not meta_path.exists():
            atomic_write(meta_path, json.dumps({"format": FORMAT, "dim": self.dim}))
            return FORMAT
        meta = json.loads(meta_path.read_text())
        if meta.get("dim") != self.dim:
            raise StoreError(
                f"{self.root} holds {meta.get('dim')}-d vectors but the embedder makes {self.dim}-d ones; "
                "open it with the embedder it was built with, or export and re-import"
            )
        found = int(meta.get("format", 1))
        if found > FORMAT:
            raise StoreError(f"{self.root} was written by a newer memsdk (store format {found}, this one reads up to {FORMAT}); upgrade memsdk to open it")
        return found

    def _migrate(self, found: int) -> None:
        """Format 1 (before tiers) -> 2: every point gets ``tier: semantic``, then the shard is
        rebuilt (as `purge` does) with the tier index and the BM25 sparse vector config.
        Old memories have no BM25 vector, so hybrid search finds them by the dense half only
        until they are re-imported. 2 -> 3: every memory gets its `SCOPE_TIER_FIELD`, without
        which the BM25 IDF of its scope's searches would not count it. 3 -> 4: CURRENT is
        written as JSON. Each step is idempotent: a crash is finished next open."""
        if found >= FORMAT:
            return
        shared = self._routes.shared.engine
        if found < _SPARSE_FORMAT:
            shared.update(qe.UpdateOperation.set_payload_by_filter(qe.Filter(must=[qe.IsEmptyCondition("tier")]), {"tier": "semantic"}))
            shared.flush()
            self._dirty.add(self._routes.shared.name)
            self.purge()
        self._backfill_scope_tier()
        self._routes.layout.write(self.root)
        meta_path = self.root / "memsdk-store.json"
        atomic_write(meta_path, json.dumps({**json.loads(meta_path.read_text()), "format": FORMAT}))

    def _backfill_scope_tier(self) -> None:
        shared = self._routes.shared.engine
        missing = qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory")), qe.IsEmptyCondition(SCOPE_TIER_FIELD)])
        pairs: list[tuple[str, dict[str, Any]]] = []
        offset = None
        while True:  # read every page before the first write, so no write moves a page
            page, offset = shared.scroll(qe.ScrollRequest(offset=offset, limit=_PAGE, filter=missing, with_payload=True, with_vector=False))
            pairs += [(str(r.id), dict(r.payload or {})) for r in page]
            if offset is None:
                break
        for key, ids in group_by_scope_tier(pairs).items():
            for i in range(0, len(ids), _PAGE):
                batch: list[qe.PointId] = list(ids[i : i + _PAGE])
                shared.update(qe.UpdateOperation.set_payload(batch, {SCOPE_TIER_FIELD: key}))
        shared.flush()

    def _recover(self) -> None:
        """Finish what a kill interrupted: a journalled write, then the deletes that end a move
        to a dedicated shard (the copies it left in the shared shard; none, almost always)."""
        self._finish_journal()
        shared = self._routes.shared.engine
        for key in self._routes.dedicated:
            if shared.count(qe.CountRequest(exact=True, filter=_home_filter(key))):
                shared.update(qe.UpdateOperation.delete_points_by_filter(_home_filter(key)))
                shared.flush()

    def _finish_journal(self) -> None:
        """Apply the journalled write, if one is pending: after a kill, or after an engine error
        part-way through a write (before the next journalled write takes its place)."""
        entry = self._journal.read()
        if entry is None:
            return
        if "upsert" in entry:
            self._write([decode_point(p) for p in entry["upsert"]])
        else:
            self._delete(decode_where(entry["delete"]))
        for shard in self._routes.all():
            shard.engine.flush()
        self._journal.clear()
        if "delete" in entry:  # a delete across shards is an erase, which a purge ends
            self.purge()

    def _remove_stale_shards(self, layout: Layout) -> None:
        """Folders CURRENT does not name: a purge or a move that a kill cut short."""
        for child in shard_folders(self.root):
            if child.name not in layout.names():
                shutil.rmtree(child, ignore_errors=True)

    def _config(self, *, sparse: bool = True) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={VECTOR_NAME: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None,
            max_search_threads=self._search_threads,
        )

    def _open_shard(self, name: str, *, sparse: bool = True, fresh: bool = False) -> _Shard:
        """Load the folder ``name`` (``fresh``: create it anew, removing any leftover there).
        ``sparse`` False only for a format-1 shard, which `_migrate` rebuilds with them."""
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
            return _Shard(name, engine)
        except Exception as exc:  # the engine raises bare Exception with a Rust message
            if "WouldBlock" in str(exc):
                raise StoreLocked(f"{path} is locked by another Qdrant engine instance") from exc
            raise StoreError(f"cannot open the embedded store at {path}: {exc}") from exc

    # -- StoreTransport -------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> None:
        """One engine operation per shard written; a batch over several goes through the
        journal first, so a kill leaves all of it or none once the store is reopened."""
        if not points:
            return
        spans = len({self._routes.of(_home(p.payload)).name for p in points}) > 1
        try:
            if spans:
                self._finish_journal()
                self._journal.write({"upsert": [encode_point(p) for p in points]})
            self._write(points)
        except Exception as exc:
            # a single-shard batch was one engine operation that did not happen; a journalled one
            # may be part-written, and the journal stays to finish it
            later = "; the batch is journalled and is completed by the next write across shards or the next open" if spans and self._journal.path.exists() else ""
            raise StoreError(f"embedded store write failed: {exc}{later}") from exc
        if spans:
            self._journal.clear()
        self._grow(points)
        for shard in self._routes.all():
            shard.maybe_index(self._index_after)

    def _write(self, points: Sequence[Point]) -> None:
        routes = self._routes
        groups: dict[str, list[Point]] = {}
        for p in points:
            groups.setdefault(routes.of(_home(p.payload)).name, []).append(p)
        for shard in routes.all():
            if shard.name in groups:
                shard.upsert(groups[shard.name])

    # -- dedicated shards -----------------------------------------------------------------

    def _grow(self, points: Sequence[Point]) -> None:
        """Move each (scope, tier) of the shared shard that this write took past
        ``dedicate_after`` memories to a shard of its own."""
        if self._dedicate_after is None:
            return
        dedicated = self._routes.dedicated
        written = Counter(key for p in points if p.payload.get("kind") == "memory" and (key := _home(p.payload)) is not None and key not in dedicated)
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
        return self._routes.shared.engine.count(qe.CountRequest(exact=True, filter=qe.Filter(must=[qe.FieldCondition(key=SCOPE_TIER_FIELD, match=qe.MatchValue(key))])))

    def dedicate(self, key: str) -> None:
        """Move the memories and history events of one (scope, tier) (`scope_tier_key`) from
        the shared shard to a shard of their own. Copy, flip CURRENT (the commit point), then
        delete the copies from the shared shard; a kill before the flip leaves a folder the
        next open removes, one after it leaves copies the next open deletes."""
        routes = self._routes
        if key in routes.dedicated:
            return
        shared = routes.shared
        (name,) = routes.layout.fresh_names(1)
        own = self._copy(shared.pages(_home_filter(key)), name)
        moved = _Routes(shared, {**routes.dedicated, key: own})
        moved.layout.write(self.root)
        self._routes = moved  # from here no read looks for this tier in the shared shard
        shared.engine.update(qe.UpdateOperation.delete_points_by_filter(_home_filter(key)))
        self._sizes.pop(key, None)
        own.maybe_index(self._index_after)

    def _copy(self, pages: Iterable[list[qe.Point]], name: str) -> _Shard:
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

    def dedicated(self) -> dict[str, str]:
        """The (scope, tier) keys that have a shard of their own, and its folder."""
        return dict(self._routes.layout.dedicated)

    # -- background indexing ------------------------------------------------------------

    def wait_for_index(self) -> None:
        """Block until every running background index build has finished."""
        for shard in self._routes.all():
            shard.wait_for_index()

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        routes = self._routes
        targets = routes.targets(where)
        hits = [hit for shard, flt in targets for hit in self._search(shard.engine, flt, vector, limit, sparse, where.corpus if shard is routes.shared else None)]
        if len(targets) > 1:  # one list per shard: the best of them all
            hits = sorted(hits, key=lambda h: -h.score)[:limit]
        return hits

    @staticmethod
    def _search(engine: qe.EdgeShard, flt: qe.Filter, vector: np.ndarray, limit: int, sparse: Sparse | None, corpus: Where | None) -> list[Hit]:
        """One shard's search; ``corpus`` None: the shard's own BM25 statistics (a dedicated
        shard holds one scope's tier, so they are the corpus's)."""
        dense = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=VECTOR_NAME)
        if sparse is None:
            request = qe.QueryRequest(limit=limit, query=dense, filter=flt, with_payload=True, with_vector=False)
        else:
            depth = prefetch_limit(limit)
            bm25 = qe.Query.Nearest(_engine_sparse(sparse), using=SPARSE_NAME)
            idf = None if corpus is None else qe.SearchParams(idf=qe.IdfParams(corpus=_filter(corpus)))
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[qe.Prefetch(limit=depth, query=dense, filter=flt), qe.Prefetch(limit=depth, query=bm25, filter=flt, params=idf)],
                # the engine takes it; qdrant-edge-py 0.9.0's stub forgets that Fusion.Rrf is a Fusion
                query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]
                filter=flt,
                with_payload=True,
                with_vector=False,
            )
        try:
            found = engine.query(request)
        except Exception as exc:
            raise StoreError(f"embedded store search failed: {exc}") from exc
        return [Hit(Point(str(r.id), dict(r.payload or {})), float(r.score)) for r in found]

    def scroll(self, where: Where, *, with_vectors: bool = False) -> Iterator[Point]:
        with_vector: Any = [VECTOR_NAME, SPARSE_NAME] if with_vectors else False
        for shard, flt in self._routes.targets(where):
            offset = None
            while True:
                try:
                    page, offset = shard.engine.scroll(qe.ScrollRequest(offset=offset, limit=_PAGE, filter=flt, with_payload=True, with_vector=with_vector))
                except Exception as exc:
                    raise StoreError(f"embedded store scroll failed: {exc}") from exc
                yield from (_point(r, with_vectors) for r in page)
                if offset is None:
                    break

    def count(self, where: Where) -> int:
        return sum(shard.engine.count(qe.CountRequest(exact=True, filter=flt)) for shard, flt in self._routes.targets(where))

    def delete(self, where: Where) -> int:
        n = self.count(where)
        spans = len(self._routes.targets(where)) > 1
        try:
            if spans:  # an erase of a scope with a dedicated shard: all of it, or (on open) the rest
                self._finish_journal()
                self._journal.write({"delete": encode_where(where)})
            self._delete(where)
        except Exception as exc:
            raise StoreError(f"embedded store delete failed: {exc}") from exc
        if spans:
            self._journal.clear()
        return n

    def _delete(self, where: Where) -> None:
        for shard, flt in self._routes.targets(where):
            shard.engine.update(qe.UpdateOperation.delete_points_by_filter(flt))
            shard.engine.flush()
            self._dirty.add(shard.name)
        self._sizes.clear()  # recounted on the next write

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        wanted: list[qe.PointId] = list(ids)
        if not wanted:
            return set()
        return {str(r.id) for shard in self._routes.all() for r in shard.engine.retrieve(wanted, with_payload=False, with_vector=False)}

    def scope_keys(self, limit: int, *, include_deleted: bool = False, run_id: str | None = None) -> list[str]:
        held: list[Any] = [qe.FieldCondition(key="kind", match=qe.MatchValue("memory"))]
        if not include_deleted:
            held.append(qe.FieldCondition(key="state", match=qe.MatchValue("live")))
        if run_id is not None:
            held.append(qe.FieldCondition(key=RUN_ID_FIELD, match=qe.MatchValue(run_id)))
        live = qe.Filter(must=held)
        counts: Counter[str] = Counter()
        for shard in self._routes.all():
            try:
                # exact: an estimated count could keep a scope whose memories are all deleted
                found = shard.engine.facet(qe.FacetRequest("scope_key", limit=limit, exact=True, filter=live))
            except Exception as exc:
                raise StoreError(f"embedded store facet failed: {exc}") from exc
            counts.update({str(hit.value): hit.count for hit in found.hits})
        return [key for key, _ in counts.most_common(limit)]

    def purge(self) -> None:
        """Rewrite every shard a delete touched without its deleted data, so erased text is gone
        from disk too; a dedicated shard left empty is removed, its scope tier back in the
        shared shard."""
        self.wait_for_index()
        routes = self._routes
        stale = [s for s in routes.all() if s.name in self._dirty]
        if not stale:
            return
        copies: dict[str, _Shard] = {}
        try:
            for shard, name in zip(stale, routes.layout.fresh_names(len(stale))):
                copies[shard.name] = self._copy(shard.pages(), name)
        except BaseException:
            for copy in copies.values():
                copy.engine.close()
                shutil.rmtree(self.root / copy.name, ignore_errors=True)
            raise
        empty = {key for key, s in routes.dedicated.items() if s.name in copies and not _has_points(copies[s.name])}
        rewritten = _Routes(
            copies.get(routes.shared.name, routes.shared),
            {key: copies.get(s.name, s) for key, s in routes.dedicated.items() if key not in empty},
        )
        rewritten.layout.write(self.root)
        self._routes = rewritten
        self._dirty.clear()
        for shard in stale:
            shard.engine.close()
            shutil.rmtree(self.root / shard.name, ignore_errors=True)
        for key in empty:
            dropped = copies[routes.dedicated[key].name]
            dropped.engine.close()
            shutil.rmtree(self.root / dropped.name, ignore_errors=True)

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        return self._leases.lease(name, owner, ttl_s=ttl_s, wait_s=wait_s)

    def optimize(self) -> None:
        """Build every shard's HNSW index now, in the caller's thread."""
        for shard in self._routes.all():
            shard.wait_for_index()
            shard.engine.optimize()
            shard.unindexed = 0

    def flush(self) -> None:
        for shard in self._routes.all():
            shard.engine.flush()

    def close(self) -> None:
        if getattr(self, "_routes", None) is not None:
            for shard in self._routes.all():
                shard.close()
            self._routes = None  # type: ignore[assignment]
            self._lock.release()


def _has_points(shard: _Shard) -> bool:
    return shard.engine.count(qe.CountRequest(exact=True)) > 0
