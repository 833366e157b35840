"""Writers in different processes sharing one store (several app servers on a Qdrant server)
serialise a scope's read-plan-write cycles through the store's lease, as threads of one
process do through the bank's lock. A second process is a second `MemoryBank` over the same
transport object: its own locks, its own lease owner; only the store is shared.

Run on every engine: the lease is part of the transport contract. On qdrant-client it is a
conditional upsert into the store itself (the code a server runs); the embedded and
in-memory stores keep their lease table in the process, which is exact because no other
process can open them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.errors import Conflict, StoreLocked
from memsdk.store import StoreTransport
from memsdk.store.base import Where
from memsdk.types import EventType, Op, OpType, Scope

from .conftest import DIM, Engine

ALICE = Scope(user_id="alice")


@pytest.fixture
def store(engine: Engine, tmp_path: Path) -> Iterator[StoreTransport]:
    transport = engine.make(tmp_path)
    yield transport
    transport.close()


# -- the lease itself ---------------------------------------------------------------------------


def test_a_held_lease_makes_another_owner_wait_and_then_fail_naming_the_holder(store: StoreTransport) -> None:
    with store.lease("scope:a", "proc-1"):
        started = time.monotonic()
        with pytest.raises(StoreLocked, match="proc-1"), store.lease("scope:a", "proc-2", wait_s=0.2):
            pass
        assert time.monotonic() - started >= 0.2
        with store.lease("scope:b", "proc-2", wait_s=0.2):  # another name is another lease
            pass
    with store.lease("scope:a", "proc-2", wait_s=0.2):  # released: free for the next owner
        pass


def test_a_waiting_owner_gets_the_lease_when_it_is_released(store: StoreTransport) -> None:
    got: list[float] = []
    released = threading.Event()

    def second() -> None:
        with store.lease("scope:a", "proc-2", wait_s=5.0):
            got.append(time.monotonic())

    with store.lease("scope:a", "proc-1"):
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.15)
        assert not got  # still waiting while proc-1 holds it
        released_at = time.monotonic()
        released.set()
    waiter.join(timeout=5.0)
    assert got and got[0] >= released_at


def test_a_dead_holders_lease_expires_and_its_late_release_frees_nothing(store: StoreTransport) -> None:
    dead = store.lease("scope:a", "killed", ttl_s=0.1)
    dead.__enter__()  # taken and never released in time: its process was killed
    time.sleep(0.15)
    with store.lease("scope:a", "proc-2", wait_s=1.0):
        # the killed holder's release arriving late must not free the new owner's lease
        dead.__exit__(None, None, None)
        with pytest.raises(StoreLocked, match="proc-2"), store.lease("scope:a", "proc-3", wait_s=0.1):
            pass


# -- two processes, one scope ----------------------------------------------------------------------


class Interleave:
    """A transport wrapper that makes the race happen on cue: the first writer's read of the
    target waits (up to ``hold_s``) for the second writer's read, as two processes scheduled
    badly would. With leases the second read only comes after the first write."""

    def __init__(self, inner: StoreTransport, hold_s: float) -> None:
        self.inner, self.hold_s = inner, hold_s
        self.reads = 0
        self.second_read = threading.Event()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Any]:
        points = list(self.inner.scroll(where, with_vectors=with_vectors))
        if where.ids is not None and with_vectors:  # `apply` reading its targets
            with self._lock:
                self.reads += 1
                first = self.reads == 1
            if first:
                self.second_read.wait(self.hold_s)
            else:
                self.second_read.set()
        return points


def _two_processes(store: StoreTransport) -> tuple[MemoryBank, MemoryBank]:
    return MemoryBank(store, HashEmbedder(DIM)), MemoryBank(store, HashEmbedder(DIM))


def _update_both(store: Any, banks: tuple[MemoryBank, MemoryBank], target: Any) -> list[BaseException | None]:
    outcome: list[BaseException | None] = [None, None]

    def write(i: int, text: str) -> None:
        try:
            banks[i].apply(ALICE, [Op(op=OpType.UPDATE, target=target, text=text, expected_version=1)])
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            outcome[i] = exc

    threads = [threading.Thread(target=write, args=(0, "alice lives in Lisbon")), threading.Thread(target=write, args=(1, "alice lives in Oslo"))]
    threads[0].start()
    time.sleep(0.05)  # the first is inside its read when the second starts
    threads[1].start()
    for t in threads:
        t.join(timeout=10)
    return outcome


def test_without_leases_two_processes_lose_an_update_and_with_them_the_second_is_a_conflict(
    store: StoreTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = MemoryBank(store, HashEmbedder(DIM)).apply(ALICE, [Op(op=OpType.ADD, text="alice lives in Porto")]).records[0]

    # the control: a lease that excludes nobody, as the bank had before leases
    racing = Interleave(store, hold_s=2.0)
    monkeypatch.setattr(Interleave, "lease", lambda self, name, owner, **kw: _no_lease(), raising=False)
    assert _update_both(racing, _two_processes(racing), seed.id) == [None, None]  # both were told "applied"
    updates = [e for e in MemoryBank(store, HashEmbedder(DIM)).history(ALICE, seed.id) if e.event is EventType.UPDATE]
    assert len(updates) == 2 and updates[0].before == updates[1].before  # both rewrote v1: one update is lost
    monkeypatch.undo()

    # with leases: the second writer reads only after the first wrote, so its op (decided on
    # v1) is refused, typed, and nothing is lost
    fresh = MemoryBank(store, HashEmbedder(DIM)).apply(Scope(user_id="alice"), [Op(op=OpType.ADD, text="alice works at the port")]).records[0]
    leased = Interleave(store, hold_s=0.5)
    outcome = _update_both(leased, _two_processes(leased), fresh.id)
    assert [type(o) for o in outcome] == [type(None), Conflict]
    history = [e for e in MemoryBank(store, HashEmbedder(DIM)).history(ALICE, fresh.id) if e.event is EventType.UPDATE]
    assert [(e.before, e.after) for e in history] == [("alice works at the port", "alice lives in Lisbon")]


class _no_lease:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_many_writers_in_two_processes_lose_no_update(store: StoreTransport) -> None:
    """2 processes x 4 threads, each appending its own words to one memory with a
    read -> decide -> apply(expected_version) loop that retries on Conflict."""
    banks = _two_processes(store)
    target = banks[0].apply(ALICE, [Op(op=OpType.ADD, text="log:")]).records[0].id
    per_thread, failures = 6, []

    def writer(bank: MemoryBank, name: str) -> None:
        for i in range(per_thread):
            for _ in range(200):
                current = bank.get(ALICE, target)
                try:
                    bank.apply(ALICE, [Op(op=OpType.UPDATE, target=target, text=f"{current.text} {name}-{i}", expected_version=current.version)])
                    break
                except Conflict:
                    continue
            else:
                failures.append(f"{name}-{i}")

    threads = [threading.Thread(target=writer, args=(banks[k % 2], f"w{k}")) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures
    final = banks[1].get(ALICE, target)
    words = final.text.split()[1:]
    assert sorted(words) == sorted(f"w{k}-{i}" for k in range(8) for i in range(per_thread))  # every acknowledged write is there
    assert final.version == 1 + 8 * per_thread
    updates = [e for e in banks[0].history(ALICE, target) if e.event is EventType.UPDATE]
    assert all(later.before == earlier.after for earlier, later in zip(updates, updates[1:]))  # each extends the last
