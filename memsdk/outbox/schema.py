"""The outbox file's tables, and the migration of files written by earlier versions.

    pending   the turns waiting to be ingested, in order (``seq``), each with its ticket
    seen      (scope, turn_id) -> the ticket of the turn's first acceptance: a repeat is not
              queued again, and is answered with that ticket
    dead      turns the client refused as invalid, with the error
    done      tickets of ingested turns, remembered for `SEEN_DAYS` days

A file from before tickets has rows without one: `migrate` gives each a ticket, and gives a
``seen`` row the ticket of its turn where that turn still waits or is dead, else (it was
ingested) a new ticket recorded as done, so that every remembered turn_id answers a repeat.
"""

from __future__ import annotations

import sqlite3
import time
import uuid

from memsdk.types import Scope, Turn

__all__ = ["SCHEMA", "SEEN_DAYS", "migrate", "forget_old_ids"]

#: how long a queued turn_id is remembered to refuse it a second time
SEEN_DAYS = 30

SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    turn TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE TABLE IF NOT EXISTS seen (
    scope_key TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (scope_key, turn_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dead (
    seq INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    turn TEXT NOT NULL,
    error TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS done (
    ticket TEXT PRIMARY KEY,
    scope_key TEXT NOT NULL,
    at REAL NOT NULL
) WITHOUT ROWID;
"""
#: tables that gained a ticket column after files were written without one
_TICKETED = ("pending", "dead", "seen")


def migrate(db: sqlite3.Connection) -> None:
    """Create the tables, or bring a file of an earlier version up to this one (one transaction)."""
    db.executescript(SCHEMA)
    db.execute("BEGIN IMMEDIATE")
    try:
        for table in _TICKETED:
            if "ticket" not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN ticket TEXT")
        _ticket_old_rows(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _ticket_old_rows(db: sqlite3.Connection) -> None:
    for table in ("pending", "dead"):  # the same form as `uuid4().hex`: 32 lowercase hex digits
        db.execute(f"UPDATE {table} SET ticket = lower(hex(randomblob(16))) WHERE ticket IS NULL")
    unticketed = db.execute("SELECT scope_key, turn_id, at FROM seen WHERE ticket IS NULL").fetchall()
    if not unticketed:
        return
    queued = {
        (Scope.model_validate_json(scope).key, Turn.model_validate_json(turn).turn_id): ticket
        for scope, turn, ticket in db.execute("SELECT scope, turn, ticket FROM pending UNION ALL SELECT scope, turn, ticket FROM dead")
    }
    for scope_key, turn_id, at in unticketed:
        ticket = queued.get((scope_key, turn_id))
        if ticket is None:  # neither waiting nor dead: it was ingested
            ticket = uuid.uuid4().hex
            db.execute("INSERT INTO done (ticket, scope_key, at) VALUES (?, ?, ?)", (ticket, scope_key, at))
        db.execute("UPDATE seen SET ticket = ? WHERE scope_key = ? AND turn_id = ?", (ticket, scope_key, turn_id))


def forget_old_ids(db: sqlite3.Connection) -> None:
    """Drop turn_ids and done tickets older than `SEEN_DAYS`. A turn is done after it was
    first seen, so its ticket outlives its ``seen`` row: a remembered turn_id always finds it."""
    for table in ("seen", "done"):
        db.execute(f"DELETE FROM {table} WHERE at < ?", (time.time() - SEEN_DAYS * 86400,))
