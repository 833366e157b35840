"""`Outbox`: the durable, bounded queue between a reply and memsdk's ingest.

    outbox = Outbox(path, ingest=lambda scope, turn: client.ingest(turn, scope=scope))
    outbox.put(scope, turns)      # on disk (fsync'd) when it returns; ingested later by a worker
    outbox.enqueue(scope, turns)  # the same, returning a ticket per turn queued
    outbox.submit(scope, turns)   # the same, a Queued per turn given (a repeat: its first ticket)
    outbox.status(ticket)         # pending, done or dead (with the error)
    outbox.flush(timeout=5)       # wait until everything put so far has been ingested
    outbox.close(timeout=30)      # drain, then stop the worker; what is left stays on disk

Two users: the LangChain middleware (`memsdk_adapters.langchain`), between an agent's reply
and the ingest of its turns, and `memsdk serve`, whose accepted ingests (202) are durable
here before the reply.

The transactional-outbox pattern, so that a memory write never delays a reply (mem0's ``add``
blocks an agent for minutes: mem0 #4479, #2813) and never loses a turn:

- **Durable before acknowledged.** `put` commits the turns to an sqlite file (WAL,
  ``synchronous=FULL``) before it returns. An `Outbox` opened on the same file after a crash
  replays whatever was not ingested, in order.
- **At least once.** A row is deleted only after ``ingest`` returned. A crash between the
  two ingests that one turn again (one duplicate episodic memory; nothing is lost).
- **In order.** One worker thread takes rows in the order they were put. A row whose ingest
  fails is retried with capped, jittered exponential backoff and holds back the rows behind
  it, so a conversation's turns are never ingested out of order (the extractor reads the
  previous turns as context).
- **Bounded.** At most ``max_pending`` rows. A `put` that finds no room waits up to
  ``put_timeout_s`` for the worker to make some (backpressure), then raises `QueueFull`. A
  turn is never dropped silently.
- **Poison rows go aside.** A turn the client rejects as invalid (`InvalidInput`: retrying
  cannot fix it) moves to a dead-letter table with the error (`dead_letters`), and is logged.
- **Put once.** A turn with a ``turn_id`` is queued at most once per scope (remembered for
  `SEEN_DAYS`): an agent that re-reads its history does not ingest it again, and a caller
  that retries gets the ticket of the first acceptance (`submit`).
- **Applied once, with ``already``.** The row in hand when a process died, and a row being
  retried, may have reached the store already; ``already(scope, turn)`` is asked about
  those before they are ingested again, and a True marks them done instead. It should
  answer by the turn's identity (`memsdk serve` looks its ``turn_id`` up in the store).
- **Tickets.** Each queued turn gets a ticket; `status` says whether it is pending, done
  (remembered for `SEEN_DAYS`) or dead, and for which scope. The tables are in
  `memsdk.outbox.schema`, which also migrates files of earlier versions.

One `Outbox` per file: a second one, in this process or another, gets `StoreLocked`. Two
workers on one file would ingest every turn twice.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from filelock import FileLock, Timeout

from memsdk.errors import ClientClosed, InvalidInput, MemsdkError, StoreError, StoreLocked
from memsdk.outbox.schema import SEEN_DAYS, forget_old_ids, migrate
from memsdk.types import Scope, Turn

__all__ = ["Outbox", "QueueFull", "DeadLetter", "Ticket", "Queued", "SEEN_DAYS"]

log = logging.getLogger("memsdk.outbox")

#: how long an idle worker waits after a put before it starts ingesting
SETTLE_S = 0.02



class QueueFull(MemsdkError):
    """``max_pending`` turns already wait to be ingested and none left within the timeout.

    Ingest has been slower than traffic for a while (or the store is down and every row is
    being retried): the turns of this call were *not* queued.
    """

    def __init__(self, limit: int, waited_s: float, wanted: int) -> None:
        self.field = "max_pending"
        self.limit = limit
        super().__init__(f"max_pending: {limit} turns wait to be ingested; no room for {wanted} more after {waited_s:g} s")


class Ticket(NamedTuple):
    """Where a queued turn is: ``pending``, ``done`` or ``dead`` (``error`` says why)."""

    state: Literal["pending", "done", "dead"]
    scope_key: str
    error: str | None = None


class Queued(NamedTuple):
    """A turn handed to `Outbox.submit`: its ticket, and whether this call queued it (False:
    the scope queued its ``turn_id`` before, and ``ticket`` is that first acceptance's)."""

    ticket: str
    new: bool


class DeadLetter(NamedTuple):
    """A turn the client refused as invalid, kept with the reason instead of being retried."""

    scope: Scope
    turn: Turn
    error: str


def retry_delay(attempt: int, initial_s: float, max_s: float) -> float:
    """Seconds before retry ``attempt`` (1, 2, ...): doubling from ``initial_s`` up to
    ``max_s``, less up to a quarter at random so that many workers do not retry in step
    (openai-python's ``_calculate_retry_timeout``)."""
    return float(min(initial_s * 2.0 ** (attempt - 1), max_s) * (1 - 0.25 * random.random()))


class Outbox:
    """Turns waiting to be ingested, on disk, and the worker thread that ingests them.

    ``ingest(scope, turn)`` is called on the worker thread, one turn at a time; it should
    raise on failure (memsdk's errors: `InvalidInput` dead-letters the turn, `ClientClosed`
    stops the worker, anything else is retried).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ingest: Callable[[Scope, Turn], object],
        already: Callable[[Scope, Turn], bool] | None = None,
        max_pending: int = 10_000,
        put_timeout_s: float = 5.0,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 30.0,
    ) -> None:
        if not isinstance(max_pending, int) or isinstance(max_pending, bool) or max_pending < 1:
            raise InvalidInput("max_pending", f"expected a positive int, got {max_pending!r}")
        if put_timeout_s < 0:
            raise InvalidInput("put_timeout_s", f"must be >= 0, got {put_timeout_s!r}")
        if not 0 < retry_initial_s <= retry_max_s:
            raise InvalidInput("retry_initial_s", f"expected 0 < retry_initial_s <= retry_max_s, got {retry_initial_s!r} and {retry_max_s!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_pending, self.put_timeout_s = max_pending, put_timeout_s
        self._ingest, self._already, self._retry = ingest, already, (retry_initial_s, retry_max_s)
        self._puts = 0
        # not thread-local: the worker releases it when close() left it a turn in hand. No soft
        # fallback: its marker file outlives a crash and would lock out the process that replays
        self._lock = FileLock(f"{self.path}.lock", thread_local=False, fallback_to_soft=False)
        try:
            self._lock.acquire(blocking=False)
        except Timeout:
            raise StoreLocked(f"the outbox {self.path} is open in another Outbox (this process or another); pass another outbox path") from None
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a put survives power loss, not only a crash
            migrate(self._db)
            forget_old_ids(self._db)
            self._pending: int = self._db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
            # the row a dead process may have had in hand: maybe in the store already
            self._suspect: int | None = self._db.execute("SELECT MIN(seq) FROM pending").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self._lock.release()
            raise StoreError(f"cannot open the outbox {self.path}: {exc}") from exc
        # one condition for everything that waits: the worker for rows, `put` for room,
        # `flush`/`close` for an empty queue; it also guards the connection
        self._cond = threading.Condition()
        # closing: `put` refuses; halted: the worker takes no more rows (it still records the
        # one in hand); in_hand: inside an ingest call; closed: the file is released
        self._closing = self._halted = self._in_hand = self._closed = False
        if self._pending:
            log.info("outbox %s: replaying %d turns left by the last process", self.path, self._pending)
        self._worker = threading.Thread(target=self._work, name=f"memsdk-outbox-{self.path.name}", daemon=True)
        self._worker.start()

    @property
    def pending(self) -> int:
        """Turns on disk not ingested yet (the one being ingested included)."""
        return self._pending

    # -- the producer side (the agent's thread) -------------------------------------------------

    def put(self, scope: Scope, turns: Sequence[Turn], *, timeout: float | None = None) -> int:
        """Queue ``turns`` for ``scope``; return how many were new (a ``turn_id`` already put
        for this scope is skipped). Durable when it returns. With no room, wait up to
        ``timeout`` (default ``put_timeout_s``) and then raise `QueueFull`, queuing none."""
        return len(self.enqueue(scope, turns, timeout=timeout))

    def enqueue(self, scope: Scope, turns: Sequence[Turn], *, timeout: float | None = None) -> list[str]:
        """`put`, returning the ticket of each turn queued (`status`)."""
        return [q.ticket for q in self.submit(scope, turns, timeout=timeout) if q.new]

    def submit(self, scope: Scope, turns: Sequence[Turn], *, timeout: float | None = None) -> list[Queued]:
        """`put`, returning a `Queued` per turn given, in order: a turn whose ``turn_id`` the
        scope queued before (in this call too) is not queued again, and gets the ticket of that
        first acceptance, so a caller that retries can follow the turn."""
        wait_s = self.put_timeout_s if timeout is None else timeout
        if len(turns) > self.max_pending:
            raise QueueFull(self.max_pending, 0.0, len(turns))
        deadline = time.monotonic() + wait_s
        with self._cond:
            self._check_open()
            while self._pending + len(turns) > self.max_pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise QueueFull(self.max_pending, wait_s, len(turns))
                self._cond.wait(left)
                self._check_open()
            queued = self._insert(scope, turns)
            self._pending += sum(q.new for q in queued)
            self._cond.notify_all()
        return queued

    def _insert(self, scope: Scope, turns: Sequence[Turn]) -> list[Queued]:
        scope_json, now, queued = scope.model_dump_json(exclude_none=True), time.time(), []
        self._puts += 1
        if self._puts % 1000 == 0:  # a long-lived process keeps the table small too
            forget_old_ids(self._db)
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for turn in turns:
                ticket = uuid.uuid4().hex
                if turn.turn_id is not None:
                    seen = self._db.execute("INSERT OR IGNORE INTO seen (scope_key, turn_id, at, ticket) VALUES (?, ?, ?, ?)", (scope.key, turn.turn_id, now, ticket))
                    if seen.rowcount == 0:
                        first = self._db.execute("SELECT ticket FROM seen WHERE scope_key = ? AND turn_id = ?", (scope.key, turn.turn_id)).fetchone()
                        queued.append(Queued(first[0], False))
                        continue
                self._db.execute("INSERT INTO pending (scope, turn, ticket) VALUES (?, ?, ?)", (scope_json, turn.model_dump_json(), ticket))
                queued.append(Queued(ticket, True))
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StoreError(f"cannot queue turns in the outbox {self.path}: {exc}") from exc
        return queued

    def _check_open(self) -> None:
        if self._closing:
            raise ClientClosed(f"the outbox {self.path} is closed")

    # -- the worker thread -------------------------------------------------------------------

    def _work(self) -> None:
        try:
            while (row := self._next()) is not None:
                self._take(*row)
        except Exception:  # the outbox file itself failed (disk full, say): the rows stay on it
            log.exception("outbox %s: the worker stopped; %d turns stay on disk for the next start", self.path, self._pending)
        finally:
            with self._cond:
                self._halted = True  # flush() and close() stop waiting for a worker that is gone
                self._in_hand = False
                self._cond.notify_all()
                closing = self._closing
            if closing:  # close() left the release to the worker: it had a turn in hand
                self._release()

    def _take(self, seq: int, scope: Scope, turn: Turn, attempts: int) -> None:
        try:
            if self._already is not None and (seq == self._suspect or attempts) and self._already(scope, turn):
                log.info("outbox %s: a turn of %s was in the store already (a replay), not ingested again", self.path, scope)
            else:
                self._ingest(scope, turn)
        except ClientClosed:
            log.warning("outbox %s: the client is closed; %d turns stay on disk for the next start", self.path, self._pending)
            with self._cond:
                self._halted = True
                self._cond.notify_all()
        except InvalidInput as exc:
            log.error("outbox %s: the client refused a turn of %s, moved to dead letters: %s", self.path, scope, exc)
            self._done(seq, dead=str(exc))
        except Exception as exc:  # noqa: BLE001 - any other failure may pass: retry it
            delay = retry_delay(attempts + 1, *self._retry)
            log.warning("outbox %s: ingest failed (attempt %d), retrying in %.1f s: %r", self.path, attempts + 1, delay, exc)
            self._failed(seq, repr(exc), delay)
        else:
            self._done(seq)

    def _next(self) -> tuple[int, Scope, Turn, int] | None:
        """The oldest row, once there is one; None when the worker should stop."""
        with self._cond:
            self._in_hand = False
            self._cond.notify_all()
            idle = False
            while True:
                if self._halted or (self._closing and self._pending == 0):
                    return None
                if self._pending and idle and not self._closing:
                    # woken by a put: let the agent's thread finish its reply before this
                    # thread competes with it for the GIL (up to a 5 ms switch interval each time)
                    self._cond.wait_for(lambda: self._halted or self._closing, timeout=SETTLE_S)
                    idle = False
                    continue
                if self._pending:
                    seq, scope, turn, attempts = self._db.execute("SELECT seq, scope, turn, attempts FROM pending ORDER BY seq LIMIT 1").fetchone()
                    self._in_hand = True
                    return seq, Scope.model_validate_json(scope), Turn.model_validate_json(turn), attempts
                self._cond.wait()
                idle = True

    # the connection stays open while the worker lives (`close`), so a turn that finishes
    # after close() timed out is still recorded, and not ingested a second time at the next start

    def _done(self, seq: int, *, dead: str | None = None) -> None:
        with self._cond:
            self._db.execute("BEGIN IMMEDIATE")
            if dead is not None:
                self._db.execute("INSERT INTO dead (seq, scope, turn, error, at, ticket) SELECT seq, scope, turn, ?, ?, ticket FROM pending WHERE seq = ?", (dead, time.time(), seq))
            else:
                row = self._db.execute("SELECT scope, ticket FROM pending WHERE seq = ?", (seq,)).fetchone()
                if row is not None and row[1] is not None:
                    self._db.execute("INSERT OR REPLACE INTO done (ticket, scope_key, at) VALUES (?, ?, ?)", (row[1], Scope.model_validate_json(row[0]).key, time.time()))
            self._db.execute("DELETE FROM pending WHERE seq = ?", (seq,))
            self._db.execute("COMMIT")
            self._pending -= 1
            self._cond.notify_all()

    def _failed(self, seq: int, error: str, delay: float) -> None:
        with self._cond:
            self._db.execute("UPDATE pending SET attempts = attempts + 1, last_error = ? WHERE seq = ?", (error, seq))
            # the backoff is a wait on the condition, so close() ends it at once
            self._cond.wait_for(lambda: self._halted, timeout=delay)

    # -- waiting and closing -----------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every turn put so far is ingested (or dead-lettered); False on timeout."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending == 0 or self._halted, timeout=timeout)
            return self._pending == 0

    def status(self, ticket: str) -> Ticket | None:
        """Where the turn queued under ``ticket`` is; None for a ticket this file never gave
        (or one done more than `SEEN_DAYS` ago)."""
        with self._cond:
            if self._closed:
                raise ClientClosed(f"the outbox {self.path} is closed")
            if row := self._db.execute("SELECT scope FROM pending WHERE ticket = ?", (ticket,)).fetchone():
                return Ticket("pending", Scope.model_validate_json(row[0]).key)
            if row := self._db.execute("SELECT scope, error FROM dead WHERE ticket = ?", (ticket,)).fetchone():
                return Ticket("dead", Scope.model_validate_json(row[0]).key, row[1])
            if row := self._db.execute("SELECT scope_key FROM done WHERE ticket = ?", (ticket,)).fetchone():
                return Ticket("done", row[0])
        return None

    def dead_letters(self) -> list[DeadLetter]:
        with self._cond:
            if self._closed:
                raise ClientClosed(f"the outbox {self.path} is closed")
            rows = self._db.execute("SELECT scope, turn, error FROM dead ORDER BY seq").fetchall()
        return [DeadLetter(Scope.model_validate_json(s), Turn.model_validate_json(t), e) for s, t, e in rows]

    def close(self, timeout: float | None = 30.0) -> int:
        """Refuse new turns, give the worker up to ``timeout`` seconds (None: no limit) to
        ingest what is queued, then stop it. Returns how many turns were not ingested (the
        next `Outbox` on this file ingests them).

        An ingest call cannot be interrupted: a turn in hand when the time is up finishes in
        the background and is recorded, and the file is released when it has (until then a
        new `Outbox` on it gets `StoreLocked`)."""
        with self._cond:
            if self._closing:
                return self._pending
            self._closing = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._pending == 0 or self._halted, timeout=timeout)
            self._halted = True
            self._cond.notify_all()
            left, busy = self._pending, self._in_hand
        if not busy:  # the worker is waiting, or gone: it stops at once
            self._worker.join()
            self._release()
        if left:
            log.warning("outbox %s: closed with %d turns not ingested; they are ingested at the next start", self.path, left)
        return left

    def _release(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._db.close()
        self._lock.release()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
