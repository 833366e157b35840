"""What the interaction log stores: one trajectory per ingest or answer, plus feedback."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from memsdk.types import Scope, Text, utcnow

__all__ = ["AppliedOp", "Trajectory", "Feedback"]


class AppliedOp(BaseModel):
    """An op as it landed in the bank: which memory, its text before and after, its new version."""

    model_config = ConfigDict(frozen=True)

    op: str
    memory_id: uuid.UUID | None
    before: str | None = None
    after: str | None = None
    version: int | None = None
    changed: bool = True


class Feedback(BaseModel):
    """A reward signal attached later to an answer: a verdict, a gold answer, or both."""

    model_config = ConfigDict(frozen=True)

    trajectory_id: uuid.UUID
    # strict: "no" must not become True, and a gold the log cannot encode is refused up front
    correct: StrictBool | None = None
    gold: Text | None = None
    at: datetime = Field(default_factory=utcnow)


class Trajectory(BaseModel):
    """One ingest or answer, with everything a trainer needs to replay and score it.

    ``calls`` are the policy calls (role, policy version, messages, raw output, parsed
    result, token counts, latency, token ids/logprobs when asked for); ``ops`` are the ops
    that landed in the bank, with memory ids before and after.
    """

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID = Field(default_factory=uuid.uuid4)
    kind: Literal["ingest", "answer", "read"]
    scope: Scope
    involves: list[Scope] = Field(
        default_factory=list,
        description="Other scopes whose data it holds (an answer over two speakers, another speaker's "
        "turn shown as context): erasing any of them removes the whole trajectory.",
    )
    input: dict[str, Any]
    calls: list[dict[str, Any]] = Field(default_factory=list)
    ops: list[AppliedOp] = Field(default_factory=list)
    output: dict[str, Any] = Field(default_factory=dict)
    policy_versions: dict[str, str] = Field(default_factory=dict)
    latency_s: float = 0.0
    started_at: datetime | None = Field(None, description="When the call began: the bank before it is its state.")
    created_at: datetime = Field(default_factory=utcnow)
    feedback: list[Feedback] = Field(default_factory=list)
