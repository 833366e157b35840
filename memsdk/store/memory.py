"""A dict-and-numpy transport: the isolated namespace that bank snapshots are forked into.

Training forks a bank once per rollout (16 rollouts per state, thousands of states), so a
fork must cost a dict copy, not an engine start. Points are immutable, so two forks share
them safely.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager

import numpy as np

from memsdk.docstrings import documented_as
from memsdk.store.base import LEASE_TTL_S, LEASE_WAIT_S, HYBRID_RRF_K, Hit, LocalLeases, Point, Sparse, StoreTransport, Where, prefetch_limit

__all__ = ["InMemoryTransport"]


class InMemoryTransport:
    """A `StoreTransport` in plain Python dicts: what a snapshot forks into (a training rollout)
    and what unit tests run on. Exact search, one process, nothing on disk."""

    def __init__(self, dim: int, points: Iterable[Point] = ()) -> None:
        self.dim = dim
        self._points: dict[str, Point] = {p.id: p for p in points}
        self._leases = LocalLeases()  # private to this process by construction

    def upsert(self, points: Sequence[Point]) -> None:
        for p in points:
            if p.vector is not None and p.vector.shape != (self.dim,):
                raise ValueError(f"vector of point {p.id} has shape {p.vector.shape}, expected ({self.dim},)")
        self._points.update((p.id, p) for p in points)

    def _matching(self, where: Where) -> list[Point]:
        if where.ids is not None:
            candidates: Iterable[Point] = (self._points[i] for i in where.ids if i in self._points)
        else:
            candidates = self._points.values()
        return [p for p in candidates if where.matches(p.id, p.payload)]

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        pts = [p for p in self._matching(where) if p.vector is not None]
        if not pts or limit <= 0:
            return []
        if sparse is None:
            return _dense(pts, vector, limit)
        # Qdrant's semantics, written out: two prefetches fused by reciprocal rank
        depth = prefetch_limit(limit)
        fused: dict[str, float] = {}
        corpus = [p for p in self._matching(where.corpus) if p.sparse is not None]
        for ranked in (_dense(pts, vector, depth), _bm25(pts, sparse, depth, corpus)):
            for rank, hit in enumerate(ranked):
                fused[hit.point.id] = fused.get(hit.point.id, 0.0) + 1.0 / (HYBRID_RRF_K + rank)
        by_id = {p.id: p for p in pts}
        best = sorted(fused, key=lambda i: -fused[i])[:limit]
        return [Hit(by_id[i], fused[i]) for i in best]

    def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Point]:
        return self._matching(where)

    def count(self, where: Where) -> int:
        return len(self._matching(where))

    def delete(self, where: Where) -> int:
        gone = self._matching(where)
        for p in gone:
            del self._points[p.id]
        return len(gone)

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        return {i for i in ids if i in self._points}

    def scope_keys(self, limit: int, *, include_deleted: bool = False, run_id: str | None = None) -> list[str]:
        memories = (p for p in self._points.values() if p.payload.get("kind") == "memory")
        if run_id is not None:
            memories = (p for p in memories if (p.payload.get("scope") or {}).get("run_id") == run_id)
        held = Counter(p.payload["scope_key"] for p in memories if include_deleted or p.payload.get("state") == "live")
        return [key for key, _ in held.most_common(limit)]

    def purge(self) -> None:
        """Nothing to do: deleted points are already unreachable garbage."""

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        return self._leases.lease(name, owner, ttl_s=ttl_s, wait_s=wait_s)

    def close(self) -> None:
        self._points = {}


def _dense(pts: list[Point], vector: np.ndarray, limit: int) -> list[Hit]:
    matrix = np.stack([p.vector for p in pts if p.vector is not None])  # [N, dim]; `search` passes only points with one
    q = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    scores = matrix @ q / np.where(norms == 0, 1.0, norms)  # cosine, like Qdrant's Cosine
    top = np.argsort(-scores, kind="stable")[:limit]
    return [Hit(pts[i], float(scores[i])) for i in top]


def _bm25(pts: list[Point], query: Sparse, limit: int, corpus: list[Point]) -> list[Hit]:
    """Dot product of the query with each document's BM25 term weights, every term weighted
    by its IDF over ``corpus`` (Qdrant's IDF modifier: ln(1 + (N - n + 0.5) / (n + 0.5)))."""
    docs = [(p, dict(zip(p.sparse.indices, p.sparse.values))) for p in pts if p.sparse is not None]
    n = {t: sum(t in p.sparse.indices for p in corpus if p.sparse is not None) for t in query.indices}
    idf = {t: math.log(1 + (len(corpus) - n[t] + 0.5) / (n[t] + 0.5)) for t in query.indices}
    scored = [(sum(w * idf[t] * terms.get(t, 0.0) for t, w in zip(query.indices, query.values)), i, p) for i, (p, terms) in enumerate(docs)]
    scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:limit]
    return [Hit(p, score) for score, _, p in scored]


documented_as(InMemoryTransport, StoreTransport)
