"""The embedded default: Qdrant's own engine in-process (qdrant-edge-py), under a data directory.

Layout of the directory::

    LOCK        flock()ed while open: one process (one client) per directory
    CURRENT     the name of the live shard folder, replaced atomically by rename
    shard-N/    the Qdrant edge shard (segments + WAL)

Why a CURRENT pointer: Qdrant keeps deleted payloads in its WAL and segment pages until
they are rewritten, so "erase" alone would leave a user's text on disk. `purge()` copies the
live points into a fresh shard, flips CURRENT, and removes the old folder; a crash at any
point leaves either the old or the new shard current, and stale folders are removed on the
next open.

Qdrant edge searches exactly until `optimize()` builds the HNSW index (about 24 ms at
100k memories exact, under 3 ms indexed, on 2 cores). The transport starts that build in
a background thread once ``index_after`` vectors have been written without one; searches
and writes go on meanwhile (the engine is built for that), and `close()` waits for it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from memsdk.errors import StoreError, StoreLocked
from memsdk.store.base import (
    HASH_FIELDS, INDEXED_FIELDS, LEASE_TTL_S, LEASE_WAIT_S, RRF_K, RUN_ID_FIELD, SCOPE_TIER_FIELD, SPARSE_NAME, VECTOR_NAME, Hit, LocalLeases, Point, Sparse, Where,
    group_by_scope_tier, prefetch_limit,
)  # fmt: skip

__all__ = ["EdgeTransport"]

_PAGE = 1024
#: the layout version in memsdk-store.json; 2 added the ``tier`` payload field
FORMAT = 3
#: the first format with BM25 sparse vectors (tiers)
_SPARSE_FORMAT = 2


def _scope_condition(where: Where) -> qe.FieldCondition:
    if where.scope_tier is not None:  # it implies the scope: one condition, not two
        return qe.FieldCondition(key=SCOPE_TIER_FIELD, match=qe.MatchValue(where.scope_tier))
    return qe.FieldCondition(key="scope_key", match=qe.MatchValue(where.scope_key))


def _filter(where: Where) -> qe.Filter:
    must: list[Any] = [_scope_condition(where)]
    if where.kind is not None:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchValue(where.kind)))
    if where.ids is not None:
        must.append(qe.HasIdCondition(set(where.ids)))
    if (state := where.state) is not None:  # set exactly when `deleted` is
        must.append(qe.FieldCondition(key="state", match=qe.MatchValue(state)))
    if where.memory_id is not None:
        must.append(qe.FieldCondition(key="memory_id", match=qe.MatchValue(where.memory_id)))
    if where.tier is not None:
        must.append(qe.FieldCondition(key="tier", match=qe.MatchValue(where.tier)))
    for field, values in zip(HASH_FIELDS, (where.content_hashes, where.context_hashes)):
        if values is not None:
            must.append(qe.FieldCondition(key=field, match=qe.MatchAny(sorted(values))))
    return qe.Filter(must=must)


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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class EdgeTransport:
    """Points in a Qdrant edge shard. Not thread-safe on its own: `MemoryBank` serialises writes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        dim: int,
        *,
        search_threads: int | None = 1,
        index_after: int | None = 20_000,
    ) -> None:
        self.root = Path(path).expanduser()
        self.dim = dim
        self._search_threads = search_threads
        self._index_after = index_after
        self._indexer: threading.Thread | None = None
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _DirLock(self.root)
        self._leases = LocalLeases()  # the folder's flock makes this process its only writer
        try:
            self._check_meta()
            self._shard_name = self._current_name()
            self._remove_stale_shards()
            self._shard = self._open_shard(self.root / self._shard_name)
            self._migrate()
            self._unindexed = self._count_unindexed()
        except BaseException:
            self._lock.release()
            raise

    # -- layout ---------------------------------------------------------------------------

    def _check_meta(self) -> None:
        meta_path = self.root / "memsdk-store.json"
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            if meta.get("dim") != self.dim:
                raise StoreError(
                    f"{self.root} holds {meta.get('dim')}-d vectors but the embedder makes {self.dim}-d ones; "
                    "open it with the embedder it was built with, or export and re-import"
                )
        else:
            _atomic_write(meta_path, json.dumps({"format": FORMAT, "dim": self.dim}))

    def _format(self) -> int:
        return int(json.loads((self.root / "memsdk-store.json").read_text()).get("format", 1))

    def _migrate(self) -> None:
        """Format 1 (before tiers) -> 2: every point gets ``tier: semantic``, then the shard is
        rebuilt (as `purge` does) with the tier index and the BM25 sparse vector config.
        Old memories have no BM25 vector, so hybrid search finds them by the dense half only
        until they are re-imported. 2 -> 3: every memory gets its `SCOPE_TIER_FIELD`, without
        which the BM25 IDF of its scope's searches would not count it. Each step is
        idempotent: a crash is finished next open."""
        found = self._format()
        if found >= FORMAT:
            return
        if found < _SPARSE_FORMAT:
            self._shard.update(qe.UpdateOperation.set_payload_by_filter(qe.Filter(must=[qe.IsEmptyCondition("tier")]), {"tier": "semantic"}))
            self._shard.flush()
            self.purge()
        self._backfill_scope_tier()
        meta_path = self.root / "memsdk-store.json"
        _atomic_write(meta_path, json.dumps({**json.loads(meta_path.read_text()), "format": FORMAT}))

    def _backfill_scope_tier(self) -> None:
        missing = qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory")), qe.IsEmptyCondition(SCOPE_TIER_FIELD)])
        pairs: list[tuple[str, dict[str, Any]]] = []
        offset = None
        while True:  # read every page before the first write, so no write moves a page
            page, offset = self._shard.scroll(qe.ScrollRequest(offset=offset, limit=_PAGE, filter=missing, with_payload=True, with_vector=False))
            pairs += [(str(r.id), dict(r.payload or {})) for r in page]
            if offset is None:
                break
        for key, ids in group_by_scope_tier(pairs).items():
            for i in range(0, len(ids), _PAGE):
                batch: list[qe.PointId] = list(ids[i : i + _PAGE])
                self._shard.update(qe.UpdateOperation.set_payload(batch, {SCOPE_TIER_FIELD: key}))
        self._shard.flush()

    def _current_name(self) -> str:
        current = self.root / "CURRENT"
        if current.exists():
            return current.read_text().strip()
        _atomic_write(current, "shard-1")
        return "shard-1"

    def _remove_stale_shards(self) -> None:
        for child in self.root.glob("shard-*"):
            if child.name != self._shard_name:
                shutil.rmtree(child, ignore_errors=True)

    def _config(self, *, sparse: bool = True) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={VECTOR_NAME: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None,
            max_search_threads=self._search_threads,
        )

    def _open_shard(self, path: Path) -> qe.EdgeShard:
        try:
            if (path / "edge_config.json").exists():
                # a format-1 shard has no sparse vectors yet: `_migrate` rebuilds it with them
                shard = qe.EdgeShard.load(str(path), self._config(sparse=self._format() >= _SPARSE_FORMAT))
            else:
                shard = qe.EdgeShard.create(str(path), self._config())
            # on a loaded shard too: one written before a field was indexed gets its index here
            # (built from the payload every record already holds, so nothing is rewritten)
            indexed = shard.info().payload_schema
            for field in INDEXED_FIELDS:
                if field not in indexed:
                    params = qe.KeywordIndexParams(is_tenant=field == "scope_key")
                    shard.update(qe.UpdateOperation.create_field_index(field, params))
            return shard
        except Exception as exc:  # the engine raises bare Exception with a Rust message
            if "WouldBlock" in str(exc):
                raise StoreLocked(f"{path} is locked by another Qdrant engine instance") from exc
            raise StoreError(f"cannot open the embedded store at {path}: {exc}") from exc

    # -- StoreTransport -------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        try:
            self._shard.update(qe.UpdateOperation.upsert_points([_edge_point(p) for p in points]))
        except Exception as exc:
            raise StoreError(f"embedded store write failed: {exc}") from exc
        self._unindexed += sum(p.vector is not None for p in points)
        self._maybe_index()

    # -- background indexing ------------------------------------------------------------

    def _count_unindexed(self) -> int:
        vectors = self._shard.count(qe.CountRequest(exact=True, filter=qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue("memory"))])))
        return max(0, vectors - self._shard.info().indexed_vectors_count)

    def _maybe_index(self) -> None:
        if self._index_after is None or self._unindexed < self._index_after:
            return
        if self._indexer is not None and self._indexer.is_alive():
            return
        self._unindexed = 0
        self._indexer = threading.Thread(target=self._shard.optimize, name="memsdk-edge-index", daemon=True)
        self._indexer.start()

    def wait_for_index(self) -> None:
        """Block until a running background index build has finished."""
        if self._indexer is not None:
            self._indexer.join()
            self._indexer = None

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        flt = _filter(where)
        dense = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=VECTOR_NAME)
        if sparse is None:
            request = qe.QueryRequest(limit=limit, query=dense, filter=flt, with_payload=True, with_vector=False)
        else:
            depth = prefetch_limit(limit)
            bm25 = qe.Query.Nearest(_engine_sparse(sparse), using=SPARSE_NAME)
            per_scope = qe.SearchParams(idf=qe.IdfParams(corpus=_filter(where.corpus)))
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[qe.Prefetch(limit=depth, query=dense, filter=flt), qe.Prefetch(limit=depth, query=bm25, filter=flt, params=per_scope)],
                # the engine takes it; qdrant-edge-py 0.9.0's stub forgets that Fusion.Rrf is a Fusion
                query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]
                filter=flt,
                with_payload=True,
                with_vector=False,
            )
        try:
            found = self._shard.query(request)
        except Exception as exc:
            raise StoreError(f"embedded store search failed: {exc}") from exc
        return [Hit(Point(str(r.id), dict(r.payload or {})), float(r.score)) for r in found]

    def scroll(self, where: Where, *, with_vectors: bool = False) -> Iterator[Point]:
        offset = None
        flt = _filter(where)
        with_vector: Any = [VECTOR_NAME, SPARSE_NAME] if with_vectors else False
        while True:
            try:
                page, offset = self._shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=_PAGE, filter=flt, with_payload=True, with_vector=with_vector)
                )
            except Exception as exc:
                raise StoreError(f"embedded store scroll failed: {exc}") from exc
            yield from (_point(r, with_vectors) for r in page)
            if offset is None:
                return

    def count(self, where: Where) -> int:
        return self._shard.count(qe.CountRequest(exact=True, filter=_filter(where)))

    def delete(self, where: Where) -> int:
        n = self.count(where)
        try:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(where)))
            self._shard.flush()
        except Exception as exc:
            raise StoreError(f"embedded store delete failed: {exc}") from exc
        return n

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        wanted: list[qe.PointId] = list(ids)
        if not wanted:
            return set()
        found = self._shard.retrieve(wanted, with_payload=False, with_vector=False)
        return {str(r.id) for r in found}

    def scope_keys(self, limit: int, *, include_deleted: bool = False, run_id: str | None = None) -> list[str]:
        held: list[Any] = [qe.FieldCondition(key="kind", match=qe.MatchValue("memory"))]
        if not include_deleted:
            held.append(qe.FieldCondition(key="state", match=qe.MatchValue("live")))
        if run_id is not None:
            held.append(qe.FieldCondition(key=RUN_ID_FIELD, match=qe.MatchValue(run_id)))
        live = qe.Filter(must=held)
        try:
            # exact: an estimated count could keep a scope whose memories are all deleted
            found = self._shard.facet(qe.FacetRequest("scope_key", limit=limit, exact=True, filter=live))
        except Exception as exc:
            raise StoreError(f"embedded store facet failed: {exc}") from exc
        return [str(hit.value) for hit in found.hits]

    def purge(self) -> None:
        """Rewrite the shard without deleted data, so erased text is gone from disk too."""
        self.wait_for_index()
        number = int(self._shard_name.rsplit("-", 1)[1]) + 1
        new_name = f"shard-{number}"
        new_path = self.root / new_name
        shutil.rmtree(new_path, ignore_errors=True)
        fresh = self._open_shard(new_path)
        try:
            for batch in _batched(self._all_points(), _PAGE):
                fresh.update(qe.UpdateOperation.upsert_points(batch))
            fresh.flush()
        except BaseException:
            fresh.close()
            shutil.rmtree(new_path, ignore_errors=True)
            raise
        self._shard.close()
        _atomic_write(self.root / "CURRENT", new_name)
        old = self.root / self._shard_name
        self._shard, self._shard_name = fresh, new_name
        shutil.rmtree(old, ignore_errors=True)

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        return self._leases.lease(name, owner, ttl_s=ttl_s, wait_s=wait_s)

    def _all_points(self) -> Iterator[qe.Point]:
        offset = None
        while True:
            page, offset = self._shard.scroll(
                qe.ScrollRequest(offset=offset, limit=_PAGE, with_payload=True, with_vector=True)
            )
            for r in page:
                yield qe.Point(r.id, r.vector or {}, r.payload)
            if offset is None:
                return

    def optimize(self) -> None:
        """Build the HNSW index now, in the caller's thread."""
        self.wait_for_index()
        self._shard.optimize()
        self._unindexed = 0

    def flush(self) -> None:
        self._shard.flush()

    def close(self) -> None:
        if getattr(self, "_shard", None) is not None:
            self.wait_for_index()
            self._shard.flush()
            self._shard.close()
            self._shard = None  # type: ignore[assignment]
            self._lock.release()


def _batched(items: Iterable[qe.Point], size: int) -> Iterator[list[qe.Point]]:
    batch: list[qe.Point] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
