"""Concurrent writers to one scope lose nothing.

Two mechanisms (README, "Concurrent writers"): a client runs ingests into one scope one at a
time (striped scope locks), and every UPDATE / DELETE a manager decides carries the version
of the memory it read (`Op.expected_version`), which `MemoryBank.apply` checks, so a writer
outside the client's locks (another client on the same bank) gets `Conflict` and the
pipeline searches and decides again. Before, two writers that read v1 of a memory both
wrote "v1 + my fact", and the second silently dropped the first one's fact (76 of 193 facts
lost with 8 threads).

The manager here is the heuristic one told to merge every fact into the closest memory, so
nearly every op is an UPDATE of a memory other writers are updating too: the worst case.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.pipeline.ingest import APPLY_ATTEMPTS
from memsdk.embedding import HashEmbedder


def merge_everything(client: MemoryClient | AsyncMemoryClient) -> None:
    manager = client._policies._policies["manager"]
    manager.merge_at, manager.duplicate_at = 0.0, 2.0  # always UPDATE the closest memory, never skip


def token(writer: int, i: int) -> str:
    return f"w{writer:02d}n{i:04d}"  # fixed width: no token is a substring of another


def turn(writer: int, i: int) -> dict[str, str]:
    return {"speaker": "Sam", "text": f"Sam wrote down note {token(writer, i)} today"}


def assert_nothing_lost(client: MemoryClient, scope: dict[str, str], tokens: list[str], results: list) -> None:
    assert all(not r.failures for r in results), [f for r in results for f in r.failures][:3]
    live = "\n".join(r.text for r in client.list(scope=scope))
    missing = [t for t in tokens if t not in live]
    assert missing == [], f"{len(missing)} of {len(tokens)} acknowledged facts are gone, e.g. {missing[:5]}"
    assert_history_consistent(client.history(scope=scope))


def assert_history_consistent(history: list) -> None:
    """Each memory's events are versions 1, 2, ... and each one starts from the text the one before left."""
    versions: dict[str, list] = defaultdict(list)
    for event in history:
        versions[str(event.memory_id)].append(event)
    for events in versions.values():
        events.sort(key=lambda e: e.version)
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        for prev, event in zip(events, events[1:]):
            assert event.before == prev.after, "an UPDATE was applied onto a version it did not read"


@pytest.mark.parametrize("writers,turns", [(8, 25), (16, 64)])
def test_threads_ingesting_one_scope_lose_no_fact(tmp_path: Path, writers: int, turns: int) -> None:
    scope = {"user_id": "sam"}
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
        merge_everything(client)
        results: list = []
        lock, start = threading.Lock(), threading.Barrier(writers)

        def write(w: int) -> None:
            start.wait()
            for i in range(turns):
                r = client.ingest(turn(w, i), scope=scope)
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == writers * turns
        assert_nothing_lost(client, scope, [token(w, i) for w in range(writers) for i in range(turns)], results)


def test_async_tasks_ingesting_one_scope_lose_no_fact(tmp_path: Path) -> None:
    scope = {"user_id": "sam"}

    async def main() -> tuple[list, list[str]]:
        async with AsyncMemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
            merge_everything(client)

            async def write(w: int) -> list:
                return [await client.ingest(turn(w, i), scope=scope) for i in range(25)]

            batches = await asyncio.gather(*(write(w) for w in range(8)))
        return [r for b in batches for r in b], [token(w, i) for w in range(8) for i in range(25)]

    results, tokens = asyncio.run(main())
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
        assert_nothing_lost(client, scope, tokens, results)


def test_clients_sharing_one_bank_never_lose_a_fact_silently(tmp_path: Path) -> None:
    """Two clients on one bank do not share locks (like two processes on one Qdrant server):
    the version check catches every stale op; a fact is stored or reported, never dropped."""
    from memsdk.bank import MemoryBank

    scope = {"user_id": "sam"}
    bank = MemoryBank.open(tmp_path / "store", embedder=HashEmbedder(64))
    clients = [MemoryClient(data_dir=tmp_path / f"c{k}", bank=bank, policies="heuristic") for k in range(2)]
    results: dict[str, list] = {}
    try:
        for c in clients:
            merge_everything(c)
        start = threading.Barrier(4)

        def write(w: int) -> None:
            start.wait()
            results.update({token(w, i): clients[w % 2].ingest(turn(w, i), scope=scope).failures for i in range(30)})

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        live = "\n".join(r.text for r in clients[0].list(scope=scope))
        unaccounted = [tok for tok, failures in results.items() if tok not in live and not any(tok in f for f in failures)]
        assert len(results) == 120 and unaccounted == []
        conflicts = sum(tok not in live for tok in results)
        print(f"\n2 clients x 2 writers, 120 facts: {120 - conflicts} stored, {conflicts} reported after {APPLY_ATTEMPTS} attempts")
        assert_history_consistent(bank.history(scope))
    finally:
        for c in clients:
            c.close()
        bank.close()


def test_a_fact_that_keeps_conflicting_is_reported_not_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsdk.errors import Conflict

    scope = {"user_id": "sam"}
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
        merge_everything(client)
        client.ingest(turn(0, 0), scope=scope)
        calls = []

        real_apply = client.bank.apply

        def always_stale(scope, ops, *, actor):  # another writer wins every race for the manager's ops
            if actor.role == "ingest":
                return real_apply(scope, ops, actor=actor)  # the turn itself is only ever added
            calls.append(1)
            raise Conflict("ops[0].target", "memory is at version 2, the op was decided on version 1")

        monkeypatch.setattr(client.bank, "apply", always_stale)
        r = client.ingest(turn(0, 1), scope=scope)
    assert len(calls) == APPLY_ATTEMPTS  # bounded: re-read and re-decided, then given up
    assert len(r.failures) == 1 and f"not applied after {APPLY_ATTEMPTS} attempts" in r.failures[0] and r.ops == []
