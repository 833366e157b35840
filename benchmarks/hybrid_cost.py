"""Where a hybrid search's time goes on the embedded engine: each half alone, and the BM25
half's IDF computed over corpora of growing size.

`benchmarks/store.py` times memsdk's own searches; this one sends the embedded engine
requests memsdk never sends (the BM25 half alone, IDF over the whole store or over another
scope), so it talks to the transport's engine handle instead of `search`. Same data as
store.py: N memories in one scope and N spread over 100 users, indexed, 200 queries, each
condition's best p95 of three passes; then the scope's N memories in a store of their own,
which is what a search would meet if each scope and tier had its own shard.

What it showed (2 cores, 100k, README *Store benchmark*): the engine runs the two halves one
after the other, and it computes a corpus's document frequencies by visiting the corpus's
points, so the corpus IDF costs in proportion to the corpus's size, even for a filter that
matches every point. In a store of the scope's tier alone, collection-wide IDF is the
scope's own and hybrid is within 1 ms of dense: the target needed that layout (a shard per
scope and tier), not a cheaper filter, and `EdgeTransport` now moves a scope tier past
`DEDICATE_AFTER` memories to a shard of its own (benchmarks/store.py times both layouts).

    .venv/bin/python benchmarks/hybrid_cost.py [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from memsdk.embedding.bm25 import Bm25Encoder
from memsdk.store import Point, Where
from memsdk.store.base import HYBRID_RRF_K, SPARSE_NAME, VECTOR_NAME, prefetch_limit
from memsdk.store.edge import EdgeTransport
from memsdk.store.edge.query import engine_filter, engine_sparse
from memsdk.types import Scope

LIMIT = 10
GLOBAL_HYBRID = "hybrid, global IDF"
MEMSDK_HYBRID = "hybrid, IDF over the scope's tier (memsdk)"
ALONE_DENSE = "dense, a store of the scope's tier alone"
ALONE_HYBRID = "hybrid, global IDF, a store of the scope's tier alone"


def _store_benchmark() -> Any:
    """benchmarks/store.py's data generator, so both benchmarks time the same memories."""
    path = Path(__file__).with_name("store.py")
    spec = importlib.util.spec_from_file_location("store_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


store: Any = _store_benchmark()


def p95_ms(send: Callable[[int], object], queries: int) -> float:
    best = float("inf")
    for _ in range(3):
        samples = []
        for i in range(queries):
            t = time.perf_counter()
            send(i)
            samples.append(time.perf_counter() - t)
        best = min(best, float(np.percentile(np.asarray(samples) * 1000, 95)))
    return best


class Requests:
    """The query requests timed against one engine, all with the same filter and queries."""

    def __init__(self, engine: qe.EdgeShard, flt: qe.Filter, vectors: np.ndarray, sparse: list[qe.SparseVector]) -> None:
        self.engine, self.flt, self.vectors, self.sparse = engine, flt, vectors, sparse
        self.depth = prefetch_limit(LIMIT)

    def _dense(self, i: int) -> qe.Query:
        return qe.Query.Nearest(self.vectors[i].tolist(), using=VECTOR_NAME)

    def _bm25(self, i: int) -> qe.Query:
        return qe.Query.Nearest(self.sparse[i], using=SPARSE_NAME)

    @staticmethod
    def _idf(corpus: qe.Filter | None) -> qe.SearchParams | None:
        return None if corpus is None else qe.SearchParams(idf=qe.IdfParams(corpus=corpus))

    def dense(self) -> Callable[[int], object]:
        return lambda i: self.engine.query(qe.QueryRequest(limit=LIMIT, query=self._dense(i), filter=self.flt, with_payload=True))

    def half(self, corpus: qe.Filter | None) -> Callable[[int], object]:
        """The BM25 prefetch of a hybrid search, alone; ``corpus`` None: collection-wide IDF."""
        return lambda i: self.engine.query(qe.QueryRequest(limit=self.depth, query=self._bm25(i), filter=self.flt, params=self._idf(corpus)))

    def hybrid(self, corpus: qe.Filter | None) -> Callable[[int], object]:
        def send(i: int) -> object:
            halves = [
                qe.Prefetch(limit=self.depth, query=self._dense(i), filter=self.flt),
                qe.Prefetch(limit=self.depth, query=self._bm25(i), filter=self.flt, params=self._idf(corpus)),
            ]
            fused = qe.Fusion.Rrf(k=HYBRID_RRF_K)
            return self.engine.query(qe.QueryRequest(limit=LIMIT, prefetches=halves, query=fused, filter=self.flt, with_payload=True))

        return send


def indexed_store(path: Path, points: list[Point]) -> EdgeTransport:
    """One shard holding ``points`` (no scope moved to a shard of its own: this benchmark
    lays the two layouts out itself), indexed."""
    transport = EdgeTransport(path, dim=store.DIM, index_after=None, dedicate_after=None)
    for i in range(0, len(points), store.BATCH):
        transport.upsert(points[i : i + store.BATCH])
    transport.optimize()
    return transport


def conditions(n: int, queries: int) -> dict[str, float]:
    """p95 ms per condition: the scope that holds N of a store's 2N memories, then the same
    N memories in a store of their own (what a shard per scope and tier would search)."""
    rng = np.random.default_rng(n)
    everyone, users = Scope(user_id="everyone"), [Scope(user_id=f"user-{u}") for u in range(store.USERS)]
    workdir = Path(tempfile.mkdtemp(prefix="bench-hybrid-"))
    try:
        mine = store.make_points(n, rng, [everyone])
        vectors = rng.standard_normal((queries, store.DIM)).astype(np.float32)
        encoder = Bm25Encoder()
        sparse = [engine_sparse(encoder.query(store.words(rng, 4))) for _ in range(queries)]
        where = Where(everyone.key, "memory", deleted=False, tier="semantic")

        shared = indexed_store(workdir / "shared", mine + store.make_points(n, rng, users))
        # requests memsdk never sends go to the engine itself
        on_shared = Requests(shared._routes.shared.engine, engine_filter(where), vectors, sparse)
        own = engine_filter(where.corpus)
        sends: dict[str, Callable[[int], object]] = {
            "dense": on_shared.dense(),
            "BM25 half, global IDF": on_shared.half(None),
            "BM25 half, IDF over a user's scope (N/100 points)": on_shared.half(engine_filter(Where(users[7].key, None, tier="semantic").corpus)),
            "BM25 half, IDF over the scope's tier (N points: memsdk)": on_shared.half(own),
            "BM25 half, IDF over every point (2N: an empty filter)": on_shared.half(qe.Filter(must=[])),
            GLOBAL_HYBRID: on_shared.hybrid(None),
            MEMSDK_HYBRID: on_shared.hybrid(own),
        }
        out = {name: p95_ms(send, queries) for name, send in sends.items()}
        shared.close()

        alone = indexed_store(workdir / "alone", mine)
        # the scope is the whole store: only kind and state are left to filter on
        live = qe.Filter(must=[qe.FieldCondition(key=k, match=qe.MatchValue(v)) for k, v in (("kind", "memory"), ("state", "live"))])
        on_alone = Requests(alone._routes.shared.engine, live, vectors, sparse)
        out[ALONE_DENSE] = p95_ms(on_alone.dense(), queries)
        out[ALONE_HYBRID] = p95_ms(on_alone.hybrid(None), queries)
        alone.close()
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    table = {n: conditions(n, args.queries) for n in args.sizes}
    print("\nEmbedded engine, one scope of N in a store of 2N (the last two rows: those N alone in a store), indexed, top-10, p95 ms (best of 3 passes):")
    print("| condition | " + " | ".join(f"N = {n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name in table[args.sizes[0]]:
        print(f"| {name} | " + " | ".join(f"{table[n][name]:.2f}" for n in args.sizes) + " |")
    for n, cells in table.items():
        print(
            f"N = {n}: hybrid - dense p95 {cells[MEMSDK_HYBRID] - cells['dense']:+.2f} ms (memsdk), {cells[GLOBAL_HYBRID] - cells['dense']:+.2f} ms with global IDF,"
            f" {cells[ALONE_HYBRID] - cells[ALONE_DENSE]:+.2f} ms in a store of the scope's tier alone"
        )


if __name__ == "__main__":
    main()
