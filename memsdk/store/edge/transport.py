"""`EdgeTransport`, the `StoreTransport` over the parts beside it: it opens a directory (lock,
format, CURRENT, shards, migration, recovery), journals a write that spans shards, and asks
each shard that can hold an answer."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from memsdk.errors import StoreError
from memsdk.store.base import LEASE_TTL_S, LEASE_WAIT_S, RUN_ID_FIELD, SPARSE_NAME, VECTOR_NAME, Hit, LocalLeases, Point, Sparse, Where
from memsdk.store.edge.durability import Journal, Layout, encode_point, encode_where
from memsdk.store.edge.lock import DirLock
from memsdk.store.edge.migration import SPARSE_FORMAT, check_meta, migrate
from memsdk.store.edge.query import record_point, search_shard
from memsdk.store.edge.recovery import finish_journal, recover, remove_stale_shards
from memsdk.store.edge.shards import DEDICATE_AFTER, PAGE, Routes, Shards, home

__all__ = ["EdgeTransport"]


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
        self._shards = Shards(self.root, dim, search_threads=search_threads, index_after=index_after, dedicate_after=dedicate_after)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = DirLock(self.root)
        self._leases = LocalLeases()  # the folder's flock makes this process its only writer
        self._journal = Journal(self.root)
        try:
            found = check_meta(self.root, self.dim)
            layout = Layout.read(self.root)
            if layout is None:
                layout = Layout(shared="shard-1")
                layout.write(self.root)
            remove_stale_shards(self.root, layout)
            self._shards.open(layout, sparse=found >= SPARSE_FORMAT)
            migrate(self._shards, found)
            recover(self._journal, self._shards)
        except BaseException:
            if getattr(self._shards, "routes", None) is not None:
                for shard in self._shards.routes.all():
                    shard.engine.close()
            self._lock.release()
            raise

    @property
    def _routes(self) -> Routes:
        """The shards as they are now; a call that reads them more than once keeps this one,
        as a move or a purge may replace them meanwhile."""
        return self._shards.routes

    # -- StoreTransport -------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> None:
        """One engine operation per shard written; a batch over several goes through the
        journal first, so a kill leaves all of it or none once the store is reopened."""
        if not points:
            return
        spans = len({self._routes.of(home(p.payload)).name for p in points}) > 1
        try:
            if spans:
                finish_journal(self._journal, self._shards)
                self._journal.write({"upsert": [encode_point(p) for p in points]})
            self._shards.write(points)
        except Exception as exc:
            # a single-shard batch was one engine operation that did not happen; a journalled one
            # may be part-written, and the journal stays to finish it
            later = "; the batch is journalled and is completed by the next write across shards or the next open" if spans and self._journal.path.exists() else ""
            raise StoreError(f"embedded store write failed: {exc}{later}") from exc
        if spans:
            self._journal.clear()
        self._shards.grow(points)
        self._shards.maybe_index()

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        routes = self._routes
        targets = routes.targets(where)
        hits = [hit for shard, flt in targets for hit in search_shard(shard.engine, flt, vector, limit, sparse, where.corpus if shard is routes.shared else None)]
        if len(targets) > 1:  # one list per shard: the best of them all
            hits = sorted(hits, key=lambda h: -h.score)[:limit]
        return hits

    def scroll(self, where: Where, *, with_vectors: bool = False) -> Iterator[Point]:
        with_vector: Any = [VECTOR_NAME, SPARSE_NAME] if with_vectors else False
        for shard, flt in self._routes.targets(where):
            offset = None
            while True:
                try:
                    page, offset = shard.engine.scroll(qe.ScrollRequest(offset=offset, limit=PAGE, filter=flt, with_payload=True, with_vector=with_vector))
                except Exception as exc:
                    raise StoreError(f"embedded store scroll failed: {exc}") from exc
                yield from (record_point(r, with_vectors) for r in page)
                if offset is None:
                    break

    def count(self, where: Where) -> int:
        return sum(shard.engine.count(qe.CountRequest(exact=True, filter=flt)) for shard, flt in self._routes.targets(where))

    def delete(self, where: Where) -> int:
        n = self.count(where)
        spans = len(self._routes.targets(where)) > 1
        try:
            if spans:  # an erase of a scope with a dedicated shard: all of it, or (on open) the rest
                finish_journal(self._journal, self._shards)
                self._journal.write({"delete": encode_where(where)})
            self._shards.delete(where)
        except Exception as exc:
            raise StoreError(f"embedded store delete failed: {exc}") from exc
        if spans:
            self._journal.clear()
        return n

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
        self._shards.purge()

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        return self._leases.lease(name, owner, ttl_s=ttl_s, wait_s=wait_s)

    def flush(self) -> None:
        self._shards.flush()

    def close(self) -> None:
        if getattr(self._shards, "routes", None) is not None:
            self._shards.close()
            self._lock.release()

    # -- beyond StoreTransport: dedicated shards, the HNSW build --------------------------

    def dedicate(self, key: str) -> None:
        """Move the memories and history events of one (scope, tier) (`scope_tier_key`) from
        the shared shard to a shard of their own (`Shards.dedicate`)."""
        self._shards.dedicate(key)

    def dedicated(self) -> dict[str, str]:
        """The (scope, tier) keys that have a shard of their own, and its folder."""
        return dict(self._routes.layout.dedicated)

    def wait_for_index(self) -> None:
        """Block until every running background index build has finished."""
        self._shards.wait_for_index()

    def optimize(self) -> None:
        """Build every shard's HNSW index now, in the caller's thread."""
        self._shards.optimize()
