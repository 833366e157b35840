"""Accepted ingests: ``202`` once the turns are on disk, each stored exactly once behind the reply.

An app that must not wait for a policy (an LLM extractor takes seconds per turn on a CPU)
posts its turns to ``/v1/ingest/accepted`` (`memsdk.server.routes_accepted`) and gets a
ticket per turn as soon as they are committed to the server's `Outbox` (the one the
LangChain middleware uses): durable before the reply, ingested in order by one worker,
drained when the server stops, and picked up again by the next server after a crash.

What a 202 promises, and how it is kept:

- **Nothing fails later that could fail now.** `check` refuses, before anything is queued,
  every turn the store would refuse (its text over the client's ``max_turn_chars``, an
  episodic record over the bank's limits), naming the caller's field.
- **A turn is its scope and its turn_id.** A turn sent without one is given one
  (``accepted-<hex>``). A turn_id the scope accepted before is not queued again, and the
  caller gets the ticket of that first acceptance, with its state (`AcceptedTurn.repeat`),
  so a writer whose 202 was lost to a crash or a dropped connection can simply send again.
- **Stored once, whatever the text.** The row a killed server had in hand may have reached
  the store before its done mark; the next server asks the store by the turn's identity
  (`_already`: a record of the scope carrying the turn_id, an indexed lookup) before it
  ingests that row again. Never by its text, which repeats ("ok", "thanks").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from memsdk.client import MemoryClient
from memsdk.client.results import AcceptedTurn
from memsdk.errors import StoreError
from memsdk.outbox import Outbox, Queued, Ticket
from memsdk.pipeline.ingest import check_turn
from memsdk.server.faults import STORED, check_armed, crash_point
from memsdk.types import Scope, Tier, Turn

__all__ = ["AcceptedIngests", "OUTBOX_FILE"]

OUTBOX_FILE = "server-outbox.sqlite3"


class AcceptedIngests:
    """The server's queue of accepted turns over ``client`` (which it does not close)."""

    def __init__(self, client: MemoryClient, path: str | Path | None = None, *, max_pending: int = 10_000) -> None:
        check_armed()
        self.client = client
        self.outbox = Outbox(path or client.config.data_dir / OUTBOX_FILE, ingest=self._ingest, already=self._already, max_pending=max_pending)

    def check(self, turn: Turn, field: str) -> Turn:
        """``turn`` if the store will keep it, checked as the client's ingest will check it;
        else `InvalidInput` naming ``field`` (``turn``, ``turns[2]``) and the part at fault."""
        config = self.client.config
        return check_turn(turn, field, config.max_turn_chars, self.client.bank.limits if config.tiers else None)

    def accept(self, scope: Scope, turns: Sequence[Turn]) -> list[AcceptedTurn]:
        """Queue ``turns`` (each already `check`-ed; durable when this returns): one
        `AcceptedTurn` per turn, in order, a repeated turn_id with its first ticket."""
        named = [t if t.turn_id is not None else t.model_copy(update={"turn_id": f"accepted-{uuid.uuid4().hex}"}) for t in turns]
        return [self._receipt(turn, queued) for turn, queued in zip(named, self.outbox.submit(scope, named), strict=True)]

    def _receipt(self, turn: Turn, queued: Queued) -> AcceptedTurn:
        assert turn.turn_id is not None  # `accept` named every turn
        if queued.new:
            return AcceptedTurn(ticket=queued.ticket, turn_id=turn.turn_id, state="pending")
        found = self.outbox.status(queued.ticket)
        if found is None:  # a remembered turn_id always finds its ticket (`memsdk.outbox.schema`)
            raise StoreError(f"the outbox remembers turn_id {turn.turn_id!r} but not its ticket")
        return AcceptedTurn(ticket=queued.ticket, turn_id=turn.turn_id, state=found.state, error=found.error, repeat=True)

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
        crash_point(STORED)  # the window a replay must decide right: stored, not yet marked done

    def _already(self, scope: Scope, turn: Turn) -> bool:
        """Whether ``turn`` reached the store: a record of the scope carries its turn_id (its
        episodic record, with tiers; deleted ones count, so a turn forgotten since is not
        brought back). One indexed lookup, whatever the text says."""
        if turn.turn_id is None:
            return False
        tier = Tier.EPISODIC if self.client.config.tiers else None
        return self.client.bank.count(scope, include_deleted=True, tier=tier, turn_id=turn.turn_id) > 0
