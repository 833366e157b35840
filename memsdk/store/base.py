"""The contract every storage transport implements.

A transport stores *points*: an id, a JSON payload and, for memories, one dense vector.
It knows nothing of memories, ops or policies; `memsdk.bank` maps records to points.

Scope is enforced here, structurally: every read and delete takes a `Where`, and a
`Where` cannot be built without a scope key. The two unscoped calls answer only what
exists, never content: `existing_ids` which of the given ids exist (imports need it to
refuse an id that belongs to another scope), `scope_keys` which scopes hold a live memory
(the LangGraph store lists its namespaces with it).

Leases (`StoreTransport.lease`) serialise writers that do not share a process: the bank takes
a scope's lease around each read-plan-write cycle, so two processes writing one scope of a
Qdrant server take turns as two threads of one process do. Where a store is one process's by
construction (the embedded folder is flock-ed; in-memory stores are private) the lease table
lives in the process (`LocalLeases`); on qdrant-client it is a small collection beside the
points, taken with a conditional upsert. Both run the same acquire loop, `hold`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Kind", "Where", "Sparse", "Point", "Hit", "StoreTransport", "VECTOR_NAME", "SPARSE_NAME", "HYBRID_RRF_K", "INDEXED_FIELDS", "HASH_FIELDS", "RUN_ID_FIELD",
    "SCOPE_TIER_FIELD", "TURN_FIELD", "scope_tier_key", "split_scope_tier", "group_by_scope_tier", "prefetch_limit", "LEASE_TTL_S", "LEASE_WAIT_S", "LocalLeases", "hold",
]  # fmt: skip

Kind = Literal["memory", "event"]

#: the name of the dense vector on memory points (events carry none)
VECTOR_NAME = "text"
#: the name of the BM25 sparse vector on memory points (IDF applied by the engine)
SPARSE_NAME = "bm25"
#: hybrid search fuses the dense and the BM25 ranking by 1 / (HYBRID_RRF_K + rank), rank 0-based;
#: 2 is Qdrant server's default and measured best on LoCoMo turns (docs/platform-notes.md); not the
#: pipeline's `TIER_RRF_K`, which fuses whole tiers' ranked lists after the searches
HYBRID_RRF_K = 2


def prefetch_limit(limit: int) -> int:
    """Candidates each half of a hybrid search ranks before fusion: deep enough that a
    memory ranked low by one half but high by the other still meets the fusion, shallow
    enough to stay cheap (the BM25 half computes its per-scope IDF over what it ranks).
    Measured: 4 x limit with a floor of 40 retrieves as 200 did on LoCoMo val (.722 / .789 /
    .824 at 30 per speaker), at a fraction of the latency in a 20k scope (p95 +0.3 ms over
    dense instead of +2.5 ms); 2 x limit cost recall@60 .013."""
    return max(4 * limit, 40)

#: a memory's conversation, inside the ``scope`` object every record's payload holds: what
#: `StoreTransport.scope_keys` narrows by, so a forget finds a conversation's other scopes
#: without listing every scope in the store
RUN_ID_FIELD = "scope.run_id"
#: payload fields every transport indexes (keyword), because queries filter on them.
#: ``state`` is "live" or "deleted" as a keyword, not a bool: qdrant-edge 0.9 turns
#: ``MatchValue(False)`` into the integer 0, which never matches a stored bool.
#: a memory's scope key and tier in one keyword (`scope_tier_key`): a hybrid search's BM25
#: IDF corpus is one condition on it instead of two. The engine pays each corpus condition on
#: every point of the scope: sparse-only p95 at 100k in one scope, 22 ms for scope + tier as
#: two conditions, 3 ms as this one (2.6 for the scope alone).
SCOPE_TIER_FIELD = "scope_tier"
#: the hashes that link an episodic turn to the turns said around it (`MemoryRecord.context_hash`
#: names its previous turn's `content_hash`): indexed, so the answer path finds a hit's
#: neighbours (`MemoryBank.adjacent`) without a scan of the scope
HASH_FIELDS = ("content_hash", "context_hash")
#: the ids of the turns a memory came from (a list): indexed, so whether a scope holds a turn
#: is a lookup by its identity (an accepted ingest replayed after a crash asks it), never a
#: search by its text, which repeats ("ok", "thanks")
TURN_FIELD = "source_turn_ids"
INDEXED_FIELDS = ("scope_key", "kind", "state", "memory_id", "tier", RUN_ID_FIELD, SCOPE_TIER_FIELD, *HASH_FIELDS, TURN_FIELD)


def scope_tier_key(scope_key: str, tier: str) -> str:
    """One value per (scope, tier): a scope key is JSON ending in "]" and a tier holds no "/",
    so no two pairs share one."""
    return f"{scope_key}/{tier}"


def split_scope_tier(key: str) -> tuple[str, str]:
    """The scope key and the tier of a `scope_tier_key` (a tier holds no "/"; a scope key may)."""
    scope_key, tier = key.rsplit("/", 1)
    return scope_key, tier


def group_by_scope_tier(payloads: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Memory point ids by the `SCOPE_TIER_FIELD` value their payload should hold: what a
    transport writes onto memories stored before the field existed (one write per value)."""
    groups: dict[str, list[str]] = {}
    for point_id, payload in payloads:
        if payload.get("tier") is not None:  # none: from before tiers, which no tier search finds
            groups.setdefault(scope_tier_key(payload["scope_key"], payload["tier"]), []).append(point_id)
    return groups


@dataclass(frozen=True, slots=True)
class Where:
    """An AND of equality conditions. ``scope_key`` is always present. ``kind`` is None only
    in `MemoryBank.delete_all`, so a scope's records and history are erased in one engine
    operation (as two deletes, a kill between them left history without its records)."""

    scope_key: str
    kind: Kind | None
    ids: frozenset[str] | None = None
    deleted: bool | None = None
    memory_id: str | None = None
    tier: str | None = None
    #: `scope_tier_key(scope_key, tier)`; it implies the scope, so a transport filters on it
    #: alone, as one condition (only `corpus` sets it)
    scope_tier: str | None = None
    #: records whose `content_hash` is one of these (any of them: Qdrant's MatchAny)
    content_hashes: frozenset[str] | None = None
    #: records whose `context_hash` is one of these
    context_hashes: frozenset[str] | None = None
    #: records that came from one of these turns (any of their `TURN_FIELD` ids)
    turn_ids: frozenset[str] | None = None

    def __post_init__(self) -> None:
        # Defence in depth: the bank always passes a key; an empty one would match nothing in
        # Qdrant but everything in a naive implementation.
        if not self.scope_key:
            raise ValueError("Where needs a scope_key")

    @property
    def state(self) -> str | None:
        return None if self.deleted is None else ("deleted" if self.deleted else "live")

    @property
    def corpus(self) -> Where:
        """What a hybrid search computes its BM25 IDF over: the scope's memories of the tier
        searched (every tier when none is; soft-deleted ones included; history points carry no
        sparse vector), so other scopes' words never weigh in. Not the search's whole filter:
        the engine checks every corpus condition on every point of the scope, and dropping kind
        and state cost no recall (LoCoMo train and val, heuristic) and ~18 % of the hybrid time
        at 100k in one scope; scope and tier are one condition (`SCOPE_TIER_FIELD`). The scope
        alone costs val recall@10 .016."""
        if self.tier is None:
            return Where(scope_key=self.scope_key, kind=None)
        return Where(scope_key=self.scope_key, kind=None, scope_tier=scope_tier_key(self.scope_key, self.tier))

    def matches(self, point_id: str, payload: dict[str, Any]) -> bool:
        """Reference semantics, used by the in-memory transport and the contract tests."""
        return (
            payload.get("scope_key") == self.scope_key
            and (self.kind is None or payload.get("kind") == self.kind)
            and (self.ids is None or point_id in self.ids)
            and (self.deleted is None or payload.get("state") == self.state)
            and (self.memory_id is None or payload.get("memory_id") == self.memory_id)
            and (self.tier is None or payload.get("tier") == self.tier)
            and (self.scope_tier is None or payload.get(SCOPE_TIER_FIELD) == self.scope_tier)
            and (self.content_hashes is None or payload.get("content_hash") in self.content_hashes)
            and (self.context_hashes is None or payload.get("context_hash") in self.context_hashes)
            and (self.turn_ids is None or not self.turn_ids.isdisjoint(payload.get(TURN_FIELD) or ()))
        )


class _EngineSparse(Protocol):
    """What `Sparse.of` reads: Qdrant's and the embedded engine's sparse vectors alike."""

    @property
    def indices(self) -> Iterable[int]: ...

    @property
    def values(self) -> Iterable[float]: ...


@dataclass(frozen=True, slots=True)
class Sparse:
    """A sparse vector: term ids and their weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    @classmethod
    def of(cls, vector: _EngineSparse) -> Sparse:
        """From any engine's sparse vector (an object with ``indices`` and ``values``)."""
        return cls(tuple(vector.indices), tuple(vector.values))


@dataclass(frozen=True, slots=True)
class Point:
    id: str
    payload: dict[str, Any]
    vector: np.ndarray | None = None  # float32 [dim], memories only
    sparse: Sparse | None = None  # BM25 term frequencies, memories only


@dataclass(frozen=True, slots=True)
class Hit:
    point: Point
    score: float


@runtime_checkable
class StoreTransport(Protocol):
    """What `MemoryBank` needs from a storage engine."""

    dim: int

    def upsert(self, points: Sequence[Point]) -> None:
        """Write all points in one engine operation (one WAL entry where the engine has one)."""
        ...

    def search(self, vector: np.ndarray, where: Where, limit: int, *, sparse: Sparse | None = None) -> list[Hit]:
        """Nearest points by cosine similarity, best first. With ``sparse`` (a BM25 query),
        hybrid: the dense and the BM25 rankings (IDF over ``where.corpus``: the scope's tier) fused
        by reciprocal rank, `HYBRID_RRF_K`; the score is then the fused one, not a cosine."""
        ...

    def scroll(self, where: Where, *, with_vectors: bool = False) -> Iterable[Point]:
        """Every matching point, in no particular order; ``with_vectors``: dense and sparse."""
        ...

    def count(self, where: Where) -> int:
        """How many points match (exact, from the payload indexes)."""
        ...

    def delete(self, where: Where) -> int:
        """Remove matching points for good; returns how many."""
        ...

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of these ids exist in any scope (ids only, never content)."""
        ...

    def scope_keys(self, limit: int, *, include_deleted: bool = False, run_id: str | None = None) -> list[str]:
        """Up to ``limit`` scope keys that hold a live memory (any memory, with
        ``include_deleted``), the fullest first: a facet over the indexed ``scope_key``
        field, so no payload is read. With ``run_id``, only the scopes of that conversation
        (`RUN_ID_FIELD`, also indexed)."""
        ...

    def purge(self) -> None:
        """Make deleted data unrecoverable from storage files (after `delete`), where possible."""
        ...

    def lease(self, name: str, owner: str, *, ttl_s: float = ..., wait_s: float = ...) -> AbstractContextManager[None]:
        """Hold the lease ``name`` as ``owner`` for the block. Another owner waits until it is
        released, or until ``ttl_s`` after it was taken (its holder died); after ``wait_s`` the
        waiter gives up with `StoreLocked`. Not reentrant: the bank counts its own nesting."""
        ...

    def close(self) -> None:
        """Let go of the engine or the connection; a closed transport is not used again."""
        ...


#: a lease outlives a killed holder by this much; a bank holds one only for a read-plan-write
#: cycle (milliseconds: no model runs inside it), so it never expires under a live holder
LEASE_TTL_S = 30.0
#: how long a writer waits for another process's lease before `StoreLocked`
LEASE_WAIT_S = 30.0


@contextmanager
def hold(name: str, take: Callable[[float], str | None], release: Callable[[], None], wait_s: float) -> Iterator[None]:
    """The acquire loop every transport's lease runs: ``take(now)`` tries once and returns
    None when the lease is now ours, else who holds it; retries with a jittered backoff
    (1 ms growing to 50 ms) until ``wait_s``, then `StoreLocked` naming the holder."""
    from memsdk.errors import StoreLocked

    deadline, pause = time.monotonic() + wait_s, 0.001
    while (holder := take(time.time())) is not None:
        if time.monotonic() >= deadline:
            raise StoreLocked(f"{name} is being written by {holder} (waited {wait_s:g} s)")
        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, 0.05)
    try:
        yield
    finally:
        release()


class LocalLeases:
    """The lease table of a store only this process can open: names -> (owner, expiry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, float]] = {}

    def lease(self, name: str, owner: str, *, ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S) -> AbstractContextManager[None]:
        def take(now: float) -> str | None:
            with self._lock:
                holder, expires = self._held.get(name, (owner, 0.0))
                if holder != owner and expires > now:
                    return holder
                self._held[name] = (owner, now + ttl_s)
                return None

        def release() -> None:
            with self._lock:
                if self._held.get(name, ("", 0.0))[0] == owner:
                    del self._held[name]

        return hold(name, take, release, wait_s)
