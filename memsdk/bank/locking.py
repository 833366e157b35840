"""How the bank's writes are locked and ordered (`WriteLocks`).

A write to a scope holds that scope's lock (one of ``stripes`` striped locks) for its whole
read-plan-write cycle, so two threads applying ops to the same scope never interleave;
writes to different scopes overlap, embedding and planning included. Only the engine write
itself (`store_lock`) and the history sequence counter (`next_seq`) are global.
`MemoryBank.delete_all` takes every stripe (`writing_all`): its purge rewrites whole shards.
Reads take no lock (the transports serve reads beside a write, as they did under the old
bank-wide lock).

Inside the scope's lock a write takes the scope's lease in the store (`StoreTransport.lease`),
so processes that share a store (several app servers on one Qdrant server) serialise a
scope's read-plan-write cycles as threads do; an op decided on a version another writer has
since replaced is a `Conflict` (``Op.expected_version``), never a lost update. `delete_all`
takes no lease: it is an operator's command for a store nobody else is writing.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext

from memsdk.store.base import StoreTransport
from memsdk.types import Scope

__all__ = ["LOCK_STRIPES", "WriteLocks"]

#: writes to scopes on different stripes run in parallel; two scopes sharing one only wait
#: for each other (a fixed count keeps memory flat however many scopes a store holds)
LOCK_STRIPES = 64


class WriteLocks:
    """One bank's write locks over ``transport``: a lock per stripe of scopes, the scopes'
    leases in the store, the engine lock and the history sequence."""

    def __init__(self, transport: StoreTransport, stripes: int = LOCK_STRIPES) -> None:
        self.transport = transport
        self._scope_locks = [threading.RLock() for _ in range(stripes)]
        # the transports are not safe for two writers at once (EdgeTransport counts unindexed
        # vectors and starts its index build in Python), so engine writes stay one at a time
        self.store_lock = threading.Lock()
        self._seq_lock = threading.Lock()
        self._seq = 0
        # who this bank is to other processes writing the same store (the lease's owner), and
        # how deep this process is inside each scope's lease (the stripe lock is reentrant)
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._leased: dict[str, int] = {}

    @contextmanager
    def writing(self, scope: Scope) -> Iterator[None]:
        """Hold ``scope``'s write lock, then its lease in the store: its read-plan-write cycles
        run one at a time, among this process's threads and among processes sharing the store."""
        key = scope.key
        with self._scope_locks[zlib.crc32(key.encode()) % len(self._scope_locks)]:
            depth = self._leased.get(key, 0)  # only this thread touches it: it holds the stripe
            lease = self.transport.lease(f"scope:{key}", self._owner) if depth == 0 else nullcontext()
            with lease:
                self._leased[key] = depth + 1
                try:
                    yield
                finally:
                    if depth:
                        self._leased[key] = depth
                    else:
                        del self._leased[key]

    @contextmanager
    def writing_all(self) -> Iterator[None]:
        """Hold every scope's write lock, taken in stripe order (so two callers cannot deadlock)."""
        with ExitStack() as stack:
            for lock in self._scope_locks:
                stack.enter_context(lock)
            yield

    def next_seq(self) -> int:
        # Wall-clock nanoseconds keep the order across restarts; max() keeps it strict
        # within a process when the clock stalls or steps back. Per scope, seqs also follow
        # the commit order, since the scope's lock is held from here to the commit.
        with self._seq_lock:
            self._seq = max(self._seq + 1, time.time_ns())
            return self._seq

    def advance_seq(self, seqs: Iterable[int]) -> None:
        with self._seq_lock:
            self._seq = max([self._seq, *seqs])
