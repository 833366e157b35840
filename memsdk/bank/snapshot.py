"""Frozen copies of one scope: plain data.

Training rolls out many candidate op lists from the same memory state; each rollout needs
its own bank that starts equal to the shared state and cannot touch it
(`MemoryBank.from_snapshot`). A snapshot holds the scope's points (records with their
vectors, and history events); points are immutable, so a fork costs one dict build and no
re-embedding, and a fork can itself be snapshotted (Memory-R2's anchor states).
"""

from __future__ import annotations

from dataclasses import dataclass

from memsdk.bank import codec
from memsdk.bank.history import history_violations
from memsdk.store.base import Point
from memsdk.types import HistoryEvent, MemoryRecord, Scope

__all__ = ["BankSnapshot"]


@dataclass(frozen=True, slots=True)
class BankSnapshot:
    scope: Scope
    points: tuple[Point, ...]
    dim: int

    def records(self, *, include_deleted: bool = False) -> list[MemoryRecord]:
        """The scope's memories, oldest first (deleted ones too with ``include_deleted``)."""
        found = [codec.decode_record(p) for p in self.points if p.payload["kind"] == "memory"]
        return sorted((r for r in found if include_deleted or not r.deleted), key=lambda r: (r.created_at, str(r.id)))

    def history(self) -> list[HistoryEvent]:
        """The scope's history events, in the order they were written."""
        return sorted((codec.decode_event(p) for p in self.points if p.payload["kind"] == "event"), key=lambda e: e.seq)

    def violations(self) -> list[str]:
        """Why this scope could not have been produced by `MemoryBank.apply` / `restore`; [] if
        it could (`history.history_violations`). Training checks its states with it."""
        return history_violations(self.scope, self.records(include_deleted=True), self.history())
