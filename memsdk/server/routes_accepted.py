"""The accepted-ingest routes (`memsdk.server.accepted` says what a 202 promises):

    POST /v1/ingest/accepted            {"scope", "turn"} or {"scope", "turns": [...]}: 202, a ticket per turn
    GET  /v1/ingest/accepted/{ticket}   pending, done or dead (with the error)

Every turn is checked before any is queued: one refused turn refuses the request (422
naming its field, ``turns[3].text``) and queues none of them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from fastapi import APIRouter

from memsdk.client.results import AcceptedTurn, TicketStatus
from memsdk.errors import InvalidInput, MemoryNotFound
from memsdk.server.accepted import AcceptedIngests
from memsdk.server.inputs import IngestIn, ServerLimits, Who, as_turn, in_tenant, scoped

__all__ = ["AcceptedOut", "accepted_routes"]


class AcceptedOut(BaseModel):
    """The reply to an accepted ingest: a ticket per turn sent, in order."""

    tickets: list[str] = Field(description="turns[i].ticket, for each turn in the order sent (a repeated turn_id: its first ticket).")
    turns: list[AcceptedTurn]


def accepted_routes(queue: AcceptedIngests, limits: ServerLimits) -> APIRouter:
    """The routes over ``queue``; at most ``limits.max_turns`` turns per request."""
    router = APIRouter(tags=["memory"])

    @router.post("/v1/ingest/accepted", status_code=202)
    def ingest_accepted(who: Who, body: IngestIn) -> AcceptedOut:
        """Queue the turns on disk and reply at once: a ticket per turn, each turn stored
        once behind the reply. A ``turn_id`` the scope accepted before is not queued again:
        its entry is the first acceptance's ticket and state (``repeat``), so a retry is safe."""
        scope = scoped(who, body.scope)
        if (body.turn is None) == (body.turns is None):
            raise InvalidInput("turn", "give turn or turns, not both")
        if body.turns is not None and not 1 <= len(body.turns) <= limits.max_turns:
            raise InvalidInput("turns", f"give 1 to {limits.max_turns} turns")
        sent = [("turn", body.turn)] if body.turn is not None else [(f"turns[{i}]", t) for i, t in enumerate(body.turns or [])]
        turns = [queue.check(as_turn(raw, field), field) for field, raw in sent]
        accepted = queue.accept(scope, turns)
        return AcceptedOut(tickets=[t.ticket for t in accepted], turns=accepted)

    @router.get("/v1/ingest/accepted/{ticket}")
    def ingest_status(who: Who, ticket: str) -> TicketStatus:
        """``pending``, ``done`` or ``dead`` (with the error); 404 for another tenant's ticket."""
        found = queue.status(ticket)
        if found is None or not in_tenant(who.name, found.scope_key):
            raise MemoryNotFound(ticket, field="ticket")
        return TicketStatus(ticket=ticket, state=found.state, error=found.error)

    return router
