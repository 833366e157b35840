"""The outbox's tickets, its migration of older files, and its replay check (`memsdk.outbox`).

Its queueing, ordering, backpressure and dead letters are tested with the middleware that
first used it (tests/adapters/test_middleware.py)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from memsdk.outbox import Outbox
from memsdk.types import Scope, Turn

BOB = Scope(user_id="bob")


def turn(text: str, turn_id: str | None = None) -> Turn:
    return Turn(speaker="Bob", text=text, turn_id=turn_id)


def test_each_queued_turn_has_a_ticket_that_says_where_it_is(tmp_path: Path) -> None:
    gate, ingested = threading.Event(), []

    def ingest(scope: Scope, t: Turn) -> None:
        gate.wait(10)
        if t.text == "bad":
            from memsdk.errors import InvalidInput

            raise InvalidInput("turn.text", "refused")
        ingested.append(t.text)

    with Outbox(tmp_path / "o.sqlite3", ingest=ingest) as outbox:
        tickets = outbox.enqueue(BOB, [turn("a", "1"), turn("bad"), turn("a again", "1")])
        assert len(tickets) == 2 and len(set(tickets)) == 2  # the repeated turn_id is not queued
        assert [outbox.status(t).state for t in tickets] == ["pending", "pending"]  # type: ignore[union-attr]
        gate.set()
        assert outbox.flush(10)
        done, dead = outbox.status(tickets[0]), outbox.status(tickets[1])
        assert done is not None and (done.state, done.scope_key) == ("done", BOB.key)
        assert dead is not None and dead.state == "dead" and "refused" in (dead.error or "")
        assert outbox.status("no-such-ticket") is None
    assert ingested == ["a"]


def test_a_file_from_before_tickets_is_migrated_and_its_rows_replayed(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, turn TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);"
        "CREATE TABLE dead (seq INTEGER PRIMARY KEY, scope TEXT NOT NULL, turn TEXT NOT NULL, error TEXT NOT NULL, at REAL NOT NULL);"
    )
    db.execute("INSERT INTO pending (scope, turn) VALUES (?, ?)", (BOB.model_dump_json(exclude_none=True), turn("left over").model_dump_json()))
    db.commit()
    db.close()
    ingested: list[str] = []
    with Outbox(path, ingest=lambda s, t: ingested.append(t.text)) as outbox:
        assert outbox.flush(10)
        assert outbox.status(outbox.enqueue(BOB, [turn("new")])[0]) is not None
        assert outbox.flush(10)
    assert ingested == ["left over", "new"]


def test_a_repeated_turn_id_gets_its_first_ticket_in_files_from_before_tickets_too(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, turn TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);"
        "CREATE TABLE seen (scope_key TEXT NOT NULL, turn_id TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (scope_key, turn_id)) WITHOUT ROWID;"
    )
    db.execute("INSERT INTO pending (scope, turn) VALUES (?, ?)", (BOB.model_dump_json(exclude_none=True), turn("still waiting", "w").model_dump_json()))
    db.executemany("INSERT INTO seen (scope_key, turn_id, at) VALUES (?, ?, ?)", [(BOB.key, "w", time.time()), (BOB.key, "i", time.time())])  # "i": ingested
    db.commit()
    db.close()
    gate = threading.Event()
    with Outbox(path, ingest=lambda s, t: gate.wait(10)) as outbox:
        waiting, ingested, new, again = outbox.submit(BOB, [turn("still waiting", "w"), turn("ingested", "i"), turn("new", "n"), turn("new", "n")])
        assert (waiting.new, ingested.new, new.new, again.new) == (False, False, True, False) and again.ticket == new.ticket
        assert [outbox.status(q.ticket).state for q in (waiting, ingested, new)] == ["pending", "done", "pending"]  # type: ignore[union-attr]
        gate.set()


def test_the_row_a_dead_process_had_in_hand_is_checked_before_it_is_ingested_again(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite3"
    blocked = threading.Event()
    first = Outbox(path, ingest=lambda s, t: blocked.wait(), retry_initial_s=0.01, retry_max_s=0.01)
    tickets = first.enqueue(BOB, [turn("in hand when it died"), turn("behind it")])
    # the process dies: no close, the rows stay; a new process opens the file (the old lock
    # is released the way a dead process releases it)
    first._lock.release()
    asked, ingested = [], []
    second = Outbox(path, ingest=lambda s, t: ingested.append(t.text), already=lambda s, t: asked.append(t.text) or t.text == "in hand when it died")
    try:
        assert second.flush(10)
        assert asked == ["in hand when it died"]  # only the suspect row is asked about
        assert ingested == ["behind it"]  # it was in the store already: not applied twice
        assert [second.status(t).state for t in tickets] == ["done", "done"]  # type: ignore[union-attr]
    finally:
        second.close()
        blocked.set()
