"""What the client returns: typed results, one per public call."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memsdk.interactions.types import AppliedOp
from memsdk.policies.answerer import ABSTAIN_TEXT
from memsdk.types import MemoryRecord

__all__ = ["IngestResult", "AnswerResult", "ReadResult", "ForgetResult", "TicketStatus", "AcceptedTurn"]


class IngestResult(BaseModel):
    """What one ingested turn did: its facts, the ops applied (with before and after), what
    the guard refused, the policy versions that served, and the time per stage."""

    model_config = ConfigDict(frozen=True)

    trajectory_id: uuid.UUID
    episodic_id: uuid.UUID | None = Field(None, description="The turn's verbatim record in the episodic tier (None with tiers off).")
    facts: list[str]
    ops: list[AppliedOp] = Field(description="The ops that reached the bank, with before/after text.")
    policy_versions: dict[str, str]
    failures: list[str] = Field(default_factory=list, description="Parse failures and rejected ops; none lost the turn.")
    fallback: bool = Field(False, description="A heuristic stood in for an unavailable LLM.")
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds by stage: embedding, retrieval, llm, store, log.")


class ReadResult(BaseModel):
    """What `read` did (MemAgent): the final memory, stored as the scope's core memory."""

    model_config = ConfigDict(frozen=True)

    trajectory_id: uuid.UUID
    memory_id: uuid.UUID = Field(description="The scope's core memory, which now holds the read's memory (with history).")
    text: str = Field(description="The memory: at most budget_tokens (characters / 4).")
    chunks: int
    resumed_from: int = Field(0, description="Chunks an earlier, interrupted read of the same input had finished (0: a fresh read).")
    kept_old: int = Field(0, description="Chunks whose reply could not be read: the memory before them was kept.")
    policy_versions: dict[str, str]
    fallback: bool = Field(False, description="The window reader stood in for an unavailable LLM on some chunk.")
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = Field(default_factory=dict)


class AnswerResult(BaseModel):
    """An answer, the memories it used as evidence, what it cost and the policy versions that
    served; ``trajectory_id`` is what `feedback` takes."""

    model_config = ConfigDict(frozen=True)

    trajectory_id: uuid.UUID = Field(description="Pass to feedback() to attach a reward to this answer.")
    text: str = Field(description=f"The answer; {ABSTAIN_TEXT!r} when it abstained.")
    abstained: bool = Field(False, description="Memory held nothing that answers the question (or nothing at all): no answer was made up.")
    evidence: list[MemoryRecord] = Field(description="The memories the answerer said it relied on.")
    retrieved: int = Field(description="How many memories the answerer was shown.")
    policy_versions: dict[str, str]
    fallback: bool = False
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = Field(default_factory=dict)


class ForgetResult(BaseModel):
    """What `forget` matched and, unless it was a dry run, deleted or rewrote: a memory that
    only partly states the description (a summary) loses those clauses, one that is about
    it is deleted, in every tier. Deletes are soft: `restore` undoes one, `erase` makes them final."""

    model_config = ConfigDict(frozen=True)

    description: str
    memories: list[MemoryRecord] = Field(description="The memories it matched, as they were before the forget.")
    applied: bool = Field(description="False for a dry run, a refusal, or nothing matched.")
    refused: str | None = Field(None, description="Why nothing changed when it matched too many memories to be a specific request.")


class TicketStatus(BaseModel):
    """Where a turn an accepted ingest queued is (``GET /v1/ingest/accepted/{ticket}``)."""

    model_config = ConfigDict(frozen=True)

    ticket: str
    state: Literal["pending", "done", "dead"] = Field(description="pending: on the server's disk, not in the store yet; done: stored, once; dead: refused (error says why).")
    error: str | None = Field(None, description="Why a dead turn was refused.")


class AcceptedTurn(TicketStatus):
    """A turn an accepted ingest (``POST /v1/ingest/accepted``) put on the server's disk: the
    server stores it once, behind the reply. A turn's identity is its scope and ``turn_id``:
    sent again, it is not queued again, and gets this same ticket (``repeat``)."""

    turn_id: str = Field(description="The caller's turn_id, or the one the server or the remote client gave the turn.")
    repeat: bool = Field(False, description="The scope had accepted this turn_id before: the ticket is that acceptance's, and the turn was not queued again.")
