"""Where a hybrid search's time goes on the embedded engine: each half alone, and the BM25
half's IDF computed over corpora of growing size.

`benchmarks/store.py` times memsdk's own searches; this one sends the embedded engine
requests memsdk never sends (the BM25 half alone, IDF over the whole store or over another
scope), so it talks to the transport's engine handle instead of `search`. Same data as
store.py: N memories in one scope and N spread over 100 users, indexed, 200 queries, each
condition's best p95 of three passes.

What it showed (2 cores, 100k, README *Store benchmark*): the engine runs the two halves one
after the other, and it computes a corpus's document frequencies by visiting the corpus's
points, so the corpus IDF costs in proportion to the corpus's size, even for a filter that
matches every point. Hybrid within 2 ms of dense in a scope that large needs the scope's
statistics to be the store's own (a shard per scope and tier), not a cheaper filter.

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
from memsdk.store import Where
from memsdk.store.base import RRF_K, SPARSE_NAME, VECTOR_NAME, prefetch_limit
from memsdk.store.edge import EdgeTransport, _engine_sparse, _filter
from memsdk.types import Scope

LIMIT = 10
GLOBAL_HYBRID = "hybrid, global IDF"
MEMSDK_HYBRID = "hybrid, IDF over the scope's tier (memsdk)"


def _store_benchmark() -> Any:
    """benchmarks/store.py's data generator, so both benchmarks time the same memories."""
    path = Path(__file__).with_name("store.py")
    spec = importlib.util.spec_from_file_location("store_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
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


def conditions(n: int, queries: int) -> dict[str, float]:
    """p95 ms per condition, searching the scope that holds N of the store's 2N memories."""
    rng = np.random.default_rng(n)
    everyone, users = Scope(user_id="everyone"), [Scope(user_id=f"user-{u}") for u in range(store.USERS)]
    workdir = Path(tempfile.mkdtemp(prefix="bench-hybrid-"))
    try:
        transport = EdgeTransport(workdir / "edge", dim=store.DIM, index_after=None)
        points = store.make_points(n, rng, [everyone]) + store.make_points(n, rng, users)
        for i in range(0, len(points), store.BATCH):
            transport.upsert(points[i : i + store.BATCH])
        transport.optimize()
        engine = transport._shard  # requests memsdk never sends go to the engine itself
        vectors = rng.standard_normal((queries, store.DIM)).astype(np.float32)
        encoder = Bm25Encoder()
        sparse = [_engine_sparse(encoder.query(store.words(rng, 4))) for _ in range(queries)]
        where = Where(everyone.key, "memory", deleted=False, tier="semantic")
        flt, depth = _filter(where), prefetch_limit(LIMIT)

        def dense(i: int) -> qe.Query:
            return qe.Query.Nearest(vectors[i].tolist(), using=VECTOR_NAME)

        def bm25(i: int) -> qe.Query:
            return qe.Query.Nearest(sparse[i], using=SPARSE_NAME)

        def idf(corpus: qe.Filter | None) -> qe.SearchParams | None:
            return None if corpus is None else qe.SearchParams(idf=qe.IdfParams(corpus=corpus))

        def half(corpus: qe.Filter | None) -> Callable[[int], object]:
            return lambda i: engine.query(qe.QueryRequest(limit=depth, query=bm25(i), filter=flt, params=idf(corpus)))

        def hybrid(corpus: qe.Filter | None) -> Callable[[int], object]:
            def send(i: int) -> object:
                halves = [qe.Prefetch(limit=depth, query=dense(i), filter=flt), qe.Prefetch(limit=depth, query=bm25(i), filter=flt, params=idf(corpus))]
                fused = qe.Fusion.Rrf(k=RRF_K)
                return engine.query(qe.QueryRequest(limit=LIMIT, prefetches=halves, query=fused, filter=flt, with_payload=True))

            return send

        own = _filter(where.corpus)
        small = _filter(Where(users[7].key, None, tier="semantic").corpus)
        everything = qe.Filter(must=[])
        sends: dict[str, Callable[[int], object]] = {
            "dense": lambda i: engine.query(qe.QueryRequest(limit=LIMIT, query=dense(i), filter=flt, with_payload=True)),
            "BM25 half, global IDF": half(None),
            "BM25 half, IDF over a user's scope (N/100 points)": half(small),
            "BM25 half, IDF over the scope's tier (N points: memsdk)": half(own),
            "BM25 half, IDF over every point (2N: an empty filter)": half(everything),
            GLOBAL_HYBRID: hybrid(None),
            MEMSDK_HYBRID: hybrid(own),
        }
        out = {name: p95_ms(send, queries) for name, send in sends.items()}
        transport.close()
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    table = {n: conditions(n, args.queries) for n in args.sizes}
    print("\nEmbedded engine, one scope of N in a store of 2N (indexed), top-10, p95 ms (best of 3 passes):")
    print("| condition | " + " | ".join(f"N = {n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name in table[args.sizes[0]]:
        print(f"| {name} | " + " | ".join(f"{table[n][name]:.2f}" for n in args.sizes) + " |")
    for n, cells in table.items():
        print(f"N = {n}: hybrid - dense p95 {cells[MEMSDK_HYBRID] - cells['dense']:+.2f} ms (memsdk), {cells[GLOBAL_HYBRID] - cells['dense']:+.2f} ms with global IDF")


if __name__ == "__main__":
    main()
