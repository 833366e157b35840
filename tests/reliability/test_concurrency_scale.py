"""16 writers x 1,000 ingests each, sync and async at once, on one bank: no fact is lost.

Four clients share one bank, two `MemoryClient`s (four threads each) and two
`AsyncMemoryClient`s (four tasks each, one event loop per client, in its own thread). Clients
share no locks (like app processes on one Qdrant server), so two writers of different
clients on one scope race, and only `Op.expected_version` stands between them and a lost
update. Half of every writer's ingests go to one scope all 16 write, a quarter to a scope
of four writers (one per client), a quarter to the writer's own.

The manager is `ChurnManager`: every fact is appended to, merged with or moved into a
memory it was shown, which other writers are rewriting too; merges and moves are two-op
batches (UPDATE + DELETE, DELETE + ADD). Facts are single tokens that ops only move, so
the check is exact: every fact an ingest acknowledged is in exactly one live memory, every
fact it reported as failed is in none, every history explains its record, and no UPDATE
wrote over a token it did not read.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.bank import MemoryBank
from memsdk.client.results import IngestResult
from memsdk.embedding import HashEmbedder
from memsdk.embedding.base import CachedEmbedder
from memsdk.errors import Conflict
from tests.reliability._workloads import ChurnManager, check_scope, token, turn, use_manager

WRITERS, INGESTS = 16, 1000
CLIENTS = 4  # writer w runs on client w % 4: 0 and 1 are sync, 2 and 3 async


def scope_of(writer: int, i: int) -> dict[str, str]:
    if i % 4 < 2:
        return {"user_id": "shared"}
    if i % 4 == 2:
        return {"user_id": f"group{writer // CLIENTS}"}  # writers 4g..4g+3: one on each client
    return {"user_id": f"own{writer}"}


def count_conflicts(bank: MemoryBank) -> Counter[str]:
    """Wrap ``bank.apply`` to count the batches it refused as stale."""
    counts: Counter[str] = Counter()
    apply = bank.apply

    def counting(scope: Any, ops: Any, *, actor: Any) -> Any:
        try:
            return apply(scope, ops, actor=actor)
        except Conflict:
            counts["conflicts"] += 1
            raise

    bank.apply = counting  # type: ignore[method-assign]
    return counts


def test_16_writers_x_1000_ingests_sync_and_async_lose_no_fact(tmp_path: Path) -> None:
    started = time.monotonic()
    results: dict[tuple[int, int], IngestResult] = {}
    with ExitStack() as stack:
        bank = stack.enter_context(MemoryBank.open(tmp_path / "store", embedder=HashEmbedder(64)))
        counts = count_conflicts(bank)
        # built here, one after the other: each wraps the bank's embedder and gives it back on
        # close, so the exit stack closes them in reverse. tiers=False: the episodic tier is
        # append-only and the manager never sees it; the race is in the semantic tier
        sync = [stack.enter_context(MemoryClient(data_dir=tmp_path / f"c{k}", bank=bank, policies="heuristic", tiers=False)) for k in range(2)]
        aio = [AsyncMemoryClient(data_dir=tmp_path / f"c{k}", bank=bank, policies="heuristic", tiers=False) for k in range(2, CLIENTS)]
        for client in aio:
            stack.callback(lambda c=client: asyncio.run(c.aclose()))
        for client in [*sync, *aio]:
            use_manager(client, ChurnManager())

        def sync_writer(w: int) -> None:
            for i in range(INGESTS):
                results[w, i] = sync[w % CLIENTS].ingest(turn(w, i), scope=scope_of(w, i))

        def async_writers(client: AsyncMemoryClient, writers: list[int]) -> None:
            async def write(w: int) -> None:
                for i in range(INGESTS):
                    results[w, i] = await client.ingest(turn(w, i), scope=scope_of(w, i))

            async def main() -> None:
                await asyncio.gather(*(write(w) for w in writers))

            asyncio.run(main())

        threads = [threading.Thread(target=sync_writer, args=(w,)) for w in range(WRITERS) if w % CLIENTS < 2]
        threads += [threading.Thread(target=async_writers, args=(c, [w for w in range(WRITERS) if w % CLIENTS == k])) for k, c in enumerate(aio, start=2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ingested = time.monotonic() - started
        assert len(results) == WRITERS * INGESTS, "a writer died"

        acknowledged: dict[str, set[str]] = defaultdict(set)
        reported = 0
        for (w, i), r in results.items():
            key = scope_of(w, i)["user_id"]
            if r.failures:  # reported, never silent: then the fact must be nowhere
                assert all(token(w, i) in f for f in r.failures), r.failures
                reported += 1
            else:
                assert r.ops, f"{token(w, i)} acknowledged without an op"
                acknowledged[key].add(token(w, i))
        for key, tokens in acknowledged.items():
            problems = check_scope(bank, {"user_id": key}, tokens)
            assert problems == [], f"{key}: {len(problems)} problems, e.g. {problems[:5]}"
        for k, client in enumerate([*sync, *aio]):
            assert client.log is not None and client.log.count() == INGESTS * WRITERS // CLIENTS, f"client {k} logged a wrong number of ingests"
        # the run raced: without conflicts it would prove nothing about the version check
        assert counts["conflicts"] > 0
    print(
        f"\n{WRITERS} writers x {INGESTS} ingests (8 sync threads, 8 async tasks, 4 clients, one bank) in {ingested:.1f} s: "
        f"{WRITERS * INGESTS - reported} facts stored exactly once, {reported} reported, 0 lost; "
        f"{counts['conflicts']} stale batches refused and re-decided; checked in {time.monotonic() - started - ingested:.1f} s"
    )


def test_a_cache_hit_racing_an_eviction_embeds_again(monkeypatch: Any) -> None:
    """`CachedEmbedder` looks a text up and reads its vector in two locked sections; another
    thread's insert could evict it in between (a KeyError that failed the whole call)."""
    cache = CachedEmbedder(HashEmbedder(8), size=2)
    cache.embed(["old"])
    real = cache._lock

    class EvictedBetweenSections:
        entered = 0

        def __enter__(self) -> None:
            self.entered += 1
            if self.entered == 2:  # another thread inserts two texts and "old" falls out
                with real:
                    cache._cache.update(a=np.zeros(8, np.float32), b=np.zeros(8, np.float32))
                    cache._cache.pop("old")
            real.acquire()

        def __exit__(self, *exc: object) -> None:
            real.release()

    monkeypatch.setattr(cache, "_lock", EvictedBetweenSections())
    assert np.array_equal(cache.embed(["old"]), HashEmbedder(8).embed(["old"]))
