"""Accepted ingests: ``202`` once the turns are on disk, ingested behind the reply.

An app that must not wait for a policy (an LLM extractor takes seconds per turn on a CPU)
posts its turns to ``/v1/ingest/accepted`` and gets a ticket per turn as soon as they are
committed to the server's `Outbox` (the one the LangChain middleware uses): durable before
the reply, ingested in order by one worker, drained when the server stops, and picked up
again by the next server after a crash. ``/v1/ingest/accepted/{ticket}`` says where a turn is.

A turn without a ``turn_id`` gets one (``accepted-<hex>``): it is how the worker that
replays the row a killed server had in hand recognises a turn that reached the store
already (`_already`), so a crash never applies a turn twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from memsdk.client import MemoryClient
from memsdk.outbox import Outbox, Ticket
from memsdk.types import Scope, Tier, Turn

__all__ = ["AcceptedIngests", "OUTBOX_FILE"]

OUTBOX_FILE = "server-outbox.sqlite3"


class AcceptedIngests:
    """The server's queue of accepted turns over ``client`` (which it does not close)."""

    def __init__(self, client: MemoryClient, path: str | Path | None = None, *, max_pending: int = 10_000) -> None:
        self.client = client
        self.outbox = Outbox(path or client.config.data_dir / OUTBOX_FILE, ingest=self._ingest, already=self._already, max_pending=max_pending)

    def accept(self, scope: Scope, turns: Sequence[Turn]) -> list[str]:
        """Queue ``turns`` (durable when this returns); a ticket per turn queued."""
        named = [t if t.turn_id is not None else t.model_copy(update={"turn_id": f"accepted-{uuid.uuid4().hex}"}) for t in turns]
        return self.outbox.enqueue(scope, named)

    def status(self, ticket: str) -> Ticket | None:
        return self.outbox.status(ticket)

    @property
    def pending(self) -> int:
        return self.outbox.pending

    def close(self, timeout: float | None = 30.0) -> int:
        """Ingest what is queued (up to ``timeout``), then stop; returns what is left for the next start."""
        return self.outbox.close(timeout)

    def _ingest(self, scope: Scope, turn: Turn) -> None:
        self.client.ingest(turn, scope=scope)

    def _already(self, scope: Scope, turn: Turn) -> bool:
        """Whether ``turn`` is in the scope's episodic tier: its text found, with its turn id."""
        hits = self.client.search(turn.text, scope=scope, limit=5, tier=Tier.EPISODIC, hybrid=True)
        return any(h.record.source_turn_ids == (turn.turn_id,) and h.record.text == turn.text for h in hits)
