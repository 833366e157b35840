"""memsdk's filters, points and searches as qdrant_edge's types, and the engine's records
back as memsdk's: the conversions every shard's reads and writes go through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import qdrant_edge as qe

from memsdk.errors import StoreError
from memsdk.store.base import HASH_FIELDS, HYBRID_RRF_K, SCOPE_TIER_FIELD, SPARSE_NAME, TURN_FIELD, VECTOR_NAME, Hit, Point, Sparse, Where, prefetch_limit, split_scope_tier

__all__ = ["engine_filter", "home_filter", "record_point", "engine_sparse", "engine_point", "search_shard"]


def _scope_condition(where: Where) -> qe.FieldCondition:
    if where.scope_tier is not None:  # it implies the scope: one condition, not two
        return qe.FieldCondition(key=SCOPE_TIER_FIELD, match=qe.MatchValue(where.scope_tier))
    return qe.FieldCondition(key="scope_key", match=qe.MatchValue(where.scope_key))


def engine_filter(where: Where, *, scoped: bool = True, elsewhere: Sequence[str] = ()) -> qe.Filter:
    """``where`` as the engine's filter. ``scoped`` False leaves out the scope and tier, for a
    shard that holds only that scope's tier (`Shards.dedicate`): there every point
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
    if where.turn_ids is not None:  # a list field: any of its ids matches
        must.append(qe.FieldCondition(key=TURN_FIELD, match=qe.MatchAny(sorted(where.turn_ids))))
    if elsewhere:
        return qe.Filter(must=must, must_not=[qe.FieldCondition(key="tier", match=qe.MatchAny(sorted(elsewhere)))])
    return qe.Filter(must=must)


def home_filter(key: str) -> qe.Filter:
    """Every point, memory or event, whose home (`shards.home`) is ``key``."""
    scope_key, tier = split_scope_tier(key)
    return qe.Filter(must=[qe.FieldCondition(key="scope_key", match=qe.MatchValue(scope_key)), qe.FieldCondition(key="tier", match=qe.MatchValue(tier))])


def record_point(rec: Any, with_vectors: bool) -> Point:
    vector = sparse = None
    if with_vectors and rec.vector and VECTOR_NAME in rec.vector:
        vector = np.asarray(rec.vector[VECTOR_NAME], dtype=np.float32)
    if with_vectors and rec.vector and SPARSE_NAME in rec.vector:
        sparse = Sparse.of(rec.vector[SPARSE_NAME])
    return Point(str(rec.id), dict(rec.payload or {}), vector, sparse)


def engine_sparse(sparse: Sparse) -> qe.SparseVector:
    return qe.SparseVector(list(sparse.indices), list(sparse.values))


def engine_point(p: Point) -> qe.Point:
    vector: dict[str, Any] = {} if p.vector is None else {VECTOR_NAME: p.vector.astype(np.float32).tolist()}
    if p.sparse is not None:
        vector[SPARSE_NAME] = engine_sparse(p.sparse)
    return qe.Point(p.id, vector, p.payload)


def search_shard(engine: qe.EdgeShard, flt: qe.Filter, vector: np.ndarray, limit: int, sparse: Sparse | None, corpus: Where | None) -> list[Hit]:
    """One shard's search; ``corpus`` None: the shard's own BM25 statistics (a dedicated
    shard holds one scope's tier, so they are the corpus's)."""
    dense = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=VECTOR_NAME)
    if sparse is None:
        request = qe.QueryRequest(limit=limit, query=dense, filter=flt, with_payload=True, with_vector=False)
    else:
        depth = prefetch_limit(limit)
        bm25 = qe.Query.Nearest(engine_sparse(sparse), using=SPARSE_NAME)
        idf = None if corpus is None else qe.SearchParams(idf=qe.IdfParams(corpus=engine_filter(corpus)))
        request = qe.QueryRequest(
            limit=limit,
            prefetches=[qe.Prefetch(limit=depth, query=dense, filter=flt), qe.Prefetch(limit=depth, query=bm25, filter=flt, params=idf)],
            # the engine takes it; qdrant-edge-py 0.9.0's stub forgets that Fusion.Rrf is a Fusion
            query=qe.Fusion.Rrf(k=HYBRID_RRF_K),  # type: ignore[arg-type]
            filter=flt,
            with_payload=True,
            with_vector=False,
        )
    try:
        found = engine.query(request)
    except Exception as exc:
        raise StoreError(f"embedded store search failed: {exc}") from exc
    return [Hit(Point(str(r.id), dict(r.payload or {})), float(r.score)) for r in found]
