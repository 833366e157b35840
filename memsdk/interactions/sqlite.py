"""The interaction log as SQLite in WAL mode.

Why SQLite and not JSONL segments: a trajectory is appended in one transaction, so a
crash mid-write (kill -9, power loss with ``synchronous=FULL``) leaves either the whole
record or nothing, and never a torn line that corrupts the segment after it; feedback
arrives later and must be joined to its trajectory, which is an indexed lookup instead
of a scan; and the trainer reads by scope, kind and time without parsing every file.
WAL lets the trainer read while the app writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memsdk.errors import InvalidInput, MemoryNotFound, StoreError
from memsdk.interactions.types import Feedback, Trajectory
from memsdk.types import Scope

__all__ = ["InteractionLog", "Redactor"]

Redactor = Callable[[dict[str, Any]], dict[str, Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    scope_key  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trajectories_scope ON trajectories (scope_key, seq);
CREATE TABLE IF NOT EXISTS feedback (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    trajectory_id TEXT NOT NULL REFERENCES trajectories (id),
    body          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_trajectory ON feedback (trajectory_id);
-- every scope whose data a trajectory holds besides its own (Trajectory.involves)
CREATE TABLE IF NOT EXISTS trajectory_scopes (
    trajectory_id TEXT NOT NULL REFERENCES trajectories (id),
    scope_key     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trajectory_scopes_scope ON trajectory_scopes (scope_key);
"""

# the trajectories an erase of one scope removes: its own, and every other that holds its data
_ERASED = "SELECT id FROM trajectories WHERE scope_key = ?1 UNION SELECT trajectory_id FROM trajectory_scopes WHERE scope_key = ?1"


class InteractionLog:
    """Append-only trajectories and feedback. Thread-safe; one file per client data dir.

    ``redact`` runs on every trajectory (as a JSON-able dict) before anything is written,
    so secrets never reach the disk; it may drop or rewrite any field but must keep the
    shape.
    """

    def __init__(self, path: str | os.PathLike[str], *, redact: Redactor | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._redact = redact
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the interaction log {self.path}: {exc}") from exc

    def append(self, trajectory: Trajectory) -> Trajectory:
        body = trajectory.model_dump(mode="json", exclude={"feedback"})
        if self._redact is not None:
            body = self._redact(body)
            trajectory = Trajectory.model_validate(body)
        others = sorted({s.key for s in trajectory.involves} - {trajectory.scope.key})
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO trajectories (id, kind, scope_key, created_at, body) VALUES (?, ?, ?, ?, ?)",
                (str(trajectory.id), trajectory.kind, trajectory.scope.key, trajectory.created_at.isoformat(), json.dumps(body, ensure_ascii=False)),
            )
            self._db.executemany("INSERT INTO trajectory_scopes (trajectory_id, scope_key) VALUES (?, ?)", [(str(trajectory.id), k) for k in others])
            self._db.execute("COMMIT")
        return trajectory

    def add_feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> Feedback:
        if correct is None and gold is None:
            raise InvalidInput("feedback", "give correct=True/False, gold=..., or both")
        try:
            tid = uuid.UUID(str(trajectory_id))
        except ValueError:
            raise InvalidInput("trajectory_id", f"{trajectory_id!r} is not an answer id") from None
        try:
            fb = Feedback(trajectory_id=tid, correct=correct, gold=gold)
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc) from None
        with self._lock:
            row = self._db.execute("SELECT kind FROM trajectories WHERE id = ?", (str(tid),)).fetchone()
            if row is None or row[0] != "answer":
                raise MemoryNotFound(tid, field="trajectory_id")
            self._db.execute("INSERT INTO feedback (trajectory_id, body) VALUES (?, ?)", (str(tid), fb.model_dump_json()))
        return fb

    def scope_keys(self, trajectory_id: uuid.UUID) -> list[str]:
        """The keys (`Scope.key`) of every scope whose data the trajectory holds: its own and
        those it involves; empty for an unknown id. A server checks them before it lets a
        tenant attach feedback to an answer."""
        with self._lock:
            own = self._db.execute("SELECT scope_key FROM trajectories WHERE id = ?", (str(trajectory_id),)).fetchone()
            if own is None:
                return []
            others = self._db.execute("SELECT scope_key FROM trajectory_scopes WHERE trajectory_id = ?", (str(trajectory_id),)).fetchall()
        return [own[0], *(k for (k,) in others)]

    def read(self, *, scope: Scope | None = None, kind: str | None = None, since: datetime | None = None) -> Iterator[Trajectory]:
        """Trajectories in the order they were written, with their feedback attached."""
        query = "SELECT id, body FROM trajectories WHERE 1=1"
        args: list[Any] = []
        if scope is not None:
            query, args = query + " AND scope_key = ?", [*args, scope.key]
        if kind is not None:
            query, args = query + " AND kind = ?", [*args, kind]
        if since is not None:
            query, args = query + " AND created_at >= ?", [*args, since.isoformat()]
        with self._lock:
            rows = self._db.execute(query + " ORDER BY seq", args).fetchall()
            feedback: dict[str, list[dict[str, Any]]] = {}
            for tid, body in self._db.execute("SELECT trajectory_id, body FROM feedback ORDER BY seq"):
                feedback.setdefault(tid, []).append(json.loads(body))
        for tid, body in rows:
            data = json.loads(body)
            data["feedback"] = feedback.get(tid, [])
            yield Trajectory.model_validate(data)

    def count(self) -> int:
        with self._lock:
            count: int = self._db.execute("SELECT COUNT(*) FROM trajectories").fetchone()[0]
            return count

    def erase(self, scope: Scope) -> int:
        """Remove every trajectory that holds the scope's data, with its feedback (part of a
        GDPR erase): the scope's own, and other scopes' trajectories that involve it (another
        speaker's ingest that showed its turn as context, an answer over several scopes).
        Those are removed whole rather than redacted: a half-scrubbed trajectory would be
        training data that no longer matches what the policy saw."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute(f"DELETE FROM feedback WHERE trajectory_id IN ({_ERASED})", (scope.key,))
            n = self._db.execute(f"DELETE FROM trajectories WHERE id IN ({_ERASED})", (scope.key,)).rowcount
            self._db.execute("DELETE FROM trajectory_scopes WHERE trajectory_id NOT IN (SELECT id FROM trajectories)")
            self._db.execute("COMMIT")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")  # rewrite the file so erased text leaves the disk
        return n

    def close(self) -> None:
        with self._lock:
            self._db.close()
