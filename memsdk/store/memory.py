"""A dict-and-numpy transport: the isolated namespace that bank snapshots are forked into.

Training forks a bank once per rollout (16 rollouts per state, thousands of states), so a
fork must cost a dict copy, not an engine start. Points are immutable, so two forks share
them safely.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from memsdk.store.base import Hit, Point, Where

__all__ = ["InMemoryTransport"]


class InMemoryTransport:
    def __init__(self, dim: int, points: Iterable[Point] = ()) -> None:
        self.dim = dim
        self._points: dict[str, Point] = {p.id: p for p in points}

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

    def search(self, vector: np.ndarray, where: Where, limit: int) -> list[Hit]:
        pts = [p for p in self._matching(where) if p.vector is not None]
        if not pts or limit <= 0:
            return []
        matrix = np.stack([p.vector for p in pts])  # [N, dim]
        q = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
        scores = matrix @ q / np.where(norms == 0, 1.0, norms)  # cosine, like Qdrant's Cosine
        top = np.argsort(-scores, kind="stable")[:limit]
        return [Hit(pts[i], float(scores[i])) for i in top]

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

    def purge(self) -> None:
        """Nothing to do: deleted points are already unreachable garbage."""

    def close(self) -> None:
        self._points = {}
