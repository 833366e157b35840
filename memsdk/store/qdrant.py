"""qdrant-client transport: a Qdrant server (``url=``) or qdrant-client's local modes.

``":memory:"`` is ephemeral and needs no server. Local mode is brute force in Python (see
docs/platform-notes.md: fine for thousands of memories, not for 100k), so production points ``url=`` at
a Qdrant server or cluster; the bank above does not change.

Several processes may write one server: leases (`lease`) are points of a second collection,
``<collection>__leases``, one per name, taken with a conditional upsert (``update_filter``:
the lease has expired or is already ours; a missing point is inserted) and read back to see
who won. A ``path=`` folder is one process's (qdrant-client locks it), so its leases live in
the process: a lease stored there would outlive a killed holder and stall the next start.
Local mode is not thread-safe, so its calls are serialised here (a server serialises its own).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ParamSpec, TypeVar

import numpy as np

from memsdk.errors import StoreError, StoreLocked, StoreUnavailable
from memsdk.store.base import HASH_FIELDS, INDEXED_FIELDS, LEASE_TTL_S, LEASE_WAIT_S, HYBRID_RRF_K, RUN_ID_FIELD, SCOPE_TIER_FIELD, SPARSE_NAME, TURN_FIELD, VECTOR_NAME, Hit, LocalLeases, Point, Sparse, Where, group_by_scope_tier, hold, prefetch_limit

__all__ = ["QdrantClientTransport"]

_PAGE = 1024
P = ParamSpec("P")
T = TypeVar("T")


class QdrantClientTransport:
    def __init__(
        self,
        location: str | None = None,
        *,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        collection: str = "memsdk",
        dim: int,
        timeout_s: float = 10.0,
    ) -> None:
        # imported here: qdrant-client costs ~0.8 s to import and the embedded default never needs it
        from qdrant_client import QdrantClient
        from qdrant_client import models as m

        self._m = m
        self.dim = dim
        self.collection = collection
        try:
            self._client = QdrantClient(location=location, url=url, path=path, api_key=api_key, timeout=int(timeout_s))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise StoreLocked(f"the qdrant-client folder {path} is open in another process") from exc
            raise StoreError(str(exc)) from exc
        self._serial: AbstractContextManager[Any] = threading.Lock() if self._client.init_options.get("url") is None else nullcontext()
        self._local_leases = LocalLeases() if path is not None else None
        self._call(self._ensure_collection)

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one client call, mapping transport failures onto the memsdk error tree."""
        try:
            with self._serial:
                return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            if type(exc).__name__ in {"ResponseHandlingException", "ConnectError", "ConnectTimeout"}:
                raise StoreUnavailable(f"Qdrant at {self._client.init_options.get('url')} is unreachable: {exc}") from exc
            raise StoreError(f"qdrant-client call failed: {exc}") from exc

    @property
    def _leases(self) -> str:
        return f"{self.collection}__leases"

    def _ensure_collection(self) -> None:
        m = self._m
        if not self._client.collection_exists(self._leases):
            self._client.create_collection(self._leases, vectors_config=m.VectorParams(size=1, distance=m.Distance.DOT))
        if self._client.collection_exists(self.collection):
            info = self._client.get_collection(self.collection)
            vectors = info.config.params.vectors
            size = vectors[VECTOR_NAME].size if isinstance(vectors, dict) else None
            if size != self.dim:
                raise StoreError(f"collection {self.collection!r} holds {size}-d vectors, the embedder makes {self.dim}-d")
            # a collection made before hybrid search has no BM25 vector: it stays dense-only
            self.hybrid = SPARSE_NAME in (info.config.params.sparse_vectors or {})
            indexed = set(info.payload_schema or {})
            self._backfill_scope_tier()
        else:
            self._client.create_collection(
                self.collection,
                vectors_config={VECTOR_NAME: m.VectorParams(size=self.dim, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE_NAME: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            )
            self.hybrid = True
            indexed = set()
        if self._client.init_options.get("url") is None:
            return  # local mode ignores payload indexes (and warns about them)
        # an existing collection too: one made before a field was indexed gets its index here
        for field in (f for f in INDEXED_FIELDS if f not in indexed):
            schema = m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=field == "scope_key")
            self._client.create_payload_index(self.collection, field, field_schema=schema)

    def _backfill_scope_tier(self) -> None:
        """Memories stored before `SCOPE_TIER_FIELD` get it: their scope's BM25 IDF would not
        count them. A scroll that finds nothing once every memory has it."""
        m = self._m
        missing = m.Filter(must=[m.FieldCondition(key="kind", match=m.MatchValue(value="memory")), m.IsEmptyCondition(is_empty=m.PayloadField(key=SCOPE_TIER_FIELD))])
        pairs: list[tuple[str, dict[str, Any]]] = []
        offset = None
        while True:  # read every page before the first write, so no write moves a page
            page, offset = self._client.scroll(self.collection, scroll_filter=missing, limit=_PAGE, offset=offset, with_payload=True, with_vectors=False)
            pairs += [(str(p.id), dict(p.payload or {})) for p in page]
            if offset is None:
                break
        for key, ids in group_by_scope_tier(pairs).items():
            self._client.set_payload(self.collection, {SCOPE_TIER_FIELD: key}, points=m.PointIdsList(points=[*ids]), wait=True)

    def _filter(self, where: Where) -> Any:
        m = self._m
        # a scope_tier implies the scope: one condition, not two
        scope = ("scope_key", where.scope_key) if where.scope_tier is None else (SCOPE_TIER_FIELD, where.scope_tier)
        must: list[Any] = [m.FieldCondition(key=scope[0], match=m.MatchValue(value=scope[1]))]
        if where.kind is not None:
            must.append(m.FieldCondition(key="kind", match=m.MatchValue(value=where.kind)))
        if where.ids is not None:
            must.append(m.HasIdCondition(has_id=sorted(where.ids)))
        if where.deleted is not None:
            must.append(m.FieldCondition(key="state", match=m.MatchValue(value=where.state)))
        if where.memory_id is not None:
            must.append(m.FieldCondition(key="memory_id", match=m.MatchValue(value=where.memory_id)))
        if where.tier is not None:
            must.append(m.FieldCondition(key="tier", match=m.MatchValue(value=where.tier)))
        for field, values in zip(HASH_FIELDS, (where.content_hashes, where.context_hashes)):
            if values is not None:
                must.append(m.FieldCondition(key=field, match=m.MatchAny(any=sorted(values))))
        if where.turn_ids is not None:  # a list field: any of its ids matches
            must.append(m.FieldCondition(key=TURN_FIELD, match=m.MatchAny(any=sorted(where.turn_ids))))
        return m.Filter(must=must)

    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        structs = [self._m.PointStruct(id=p.id, vector=self._vectors(p), payload=p.payload) for p in points]
        # one request: a server applies it as one WAL entry per shard
        self._call(self._client.upsert, self.collection, structs, wait=True)

    def _sparse(self, sparse: Sparse) -> Any:
        return self._m.SparseVector(indices=list(sparse.indices), values=list(sparse.values))

    def _vectors(self, p: Point) -> dict[str, Any]:
        out: dict[str, Any] = {} if p.vector is None else {VECTOR_NAME: np.asarray(p.vector, dtype=np.float32).tolist()}
        if p.sparse is not None and self.hybrid:
            out[SPARSE_NAME] = self._sparse(p.sparse)
        return out

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        m, flt = self._m, self._filter(where)
        dense = np.asarray(vector, dtype=np.float32).tolist()
        if sparse is None or not self.hybrid:
            query: dict[str, Any] = {"query": dense, "using": VECTOR_NAME}
        else:
            depth = prefetch_limit(limit)
            bm25 = self._sparse(sparse)
            query = {
                "prefetch": [
                    m.Prefetch(query=dense, using=VECTOR_NAME, filter=flt, limit=depth),
                    m.Prefetch(query=bm25, using=SPARSE_NAME, filter=flt, limit=depth, params=m.SearchParams(idf=m.IdfCorpusParams(corpus=self._filter(where.corpus)))),
                ],
                "query": m.RrfQuery(rrf=m.Rrf(k=HYBRID_RRF_K)),
            }
        res = self._call(self._client.query_points, self.collection, query_filter=flt, limit=limit, with_payload=True, **query)
        return [Hit(Point(str(p.id), dict(p.payload or {})), float(p.score)) for p in res.points]

    def scroll(self, where: Where, *, with_vectors: bool = False) -> Iterator[Point]:
        offset = None
        flt = self._filter(where)
        while True:
            page, offset = self._call(
                self._client.scroll,
                self.collection,
                scroll_filter=flt,
                limit=_PAGE,
                offset=offset,
                with_payload=True,
                with_vectors=self._stored_vectors() if with_vectors else False,
            )
            for r in page:
                vec = sparse = None
                if with_vectors and isinstance(r.vector, dict) and VECTOR_NAME in r.vector:
                    vec = np.asarray(r.vector[VECTOR_NAME], dtype=np.float32)
                if with_vectors and isinstance(r.vector, dict) and isinstance(named := r.vector.get(SPARSE_NAME), self._m.SparseVector):
                    sparse = Sparse.of(named)
                yield Point(str(r.id), dict(r.payload or {}), vec, sparse)
            if offset is None:
                return

    def _stored_vectors(self) -> list[str]:
        return [VECTOR_NAME, SPARSE_NAME] if self.hybrid else [VECTOR_NAME]

    def count(self, where: Where) -> int:
        return self._call(self._client.count, self.collection, count_filter=self._filter(where), exact=True).count

    def delete(self, where: Where) -> int:
        n = self.count(where)
        self._call(
            self._client.delete, self.collection, points_selector=self._m.FilterSelector(filter=self._filter(where)), wait=True
        )
        return n

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        ids = list(ids)
        if not ids:
            return set()
        found = self._call(self._client.retrieve, self.collection, ids, with_payload=False, with_vectors=False)
        return {str(r.id) for r in found}

    def scope_keys(self, limit: int, *, include_deleted: bool = False, run_id: str | None = None) -> list[str]:
        m = self._m
        held: list[Any] = [m.FieldCondition(key="kind", match=m.MatchValue(value="memory"))]
        if not include_deleted:
            held.append(m.FieldCondition(key="state", match=m.MatchValue(value="live")))
        if run_id is not None:
            held.append(m.FieldCondition(key=RUN_ID_FIELD, match=m.MatchValue(value=run_id)))
        live = m.Filter(must=held)
        # exact: an estimated count could keep a scope whose memories are all deleted
        found = self._call(self._client.facet, self.collection, "scope_key", facet_filter=live, limit=limit, exact=True)
        return [str(hit.value) for hit in found.hits]

    def purge(self) -> None:
        """A Qdrant server vacuums deleted points itself; local mode rewrites its rows on delete."""

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        if self._local_leases is not None:
            return self._local_leases.lease(name, owner, ttl_s=ttl_s, wait_s=wait_s)
        m = self._m
        point_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"memsdk-lease:{name}"))
        ours = m.FieldCondition(key="owner", match=m.MatchValue(value=owner))

        def write(payload: dict[str, Any], only_if: Any) -> None:
            point = m.PointStruct(id=point_id, vector=[1.0], payload={"name": name, **payload})
            self._call(self._client.upsert, self._leases, [point], wait=True, update_filter=only_if)

        def take(now: float) -> str | None:
            expires = now + ttl_s
            # one conditional write: the server applies it only where the lease is free or ours
            write({"owner": owner, "expires": expires}, m.Filter(should=[m.FieldCondition(key="expires", range=m.Range(lt=now)), ours]))
            found = self._call(self._client.retrieve, self._leases, [point_id], with_payload=True, with_vectors=False)
            payload = dict(found[0].payload or {}) if found else {}
            return None if (payload.get("owner"), payload.get("expires")) == (owner, expires) else str(payload.get("owner"))

        def release() -> None:
            write({"owner": "", "expires": 0.0}, m.Filter(must=[ours]))  # not one taken over after ours expired

        return hold(name, take, release, wait_s)

    def close(self) -> None:
        self._client.close()
