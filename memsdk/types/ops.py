"""`Op`: one memory operation as a policy or the API asks for it, its shape checked before
the bank sees it."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, model_validator

from memsdk.types.fields import Metadata, ScopeId, Text, check_id
from memsdk.types.records import Tier

__all__ = ["OpType", "Op"]


class OpType(StrEnum):
    """What an `Op` asks of the bank; only the transition function applies it."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"
    #: the target stops being true (``invalid_at``), kept as history: what a correction does to
    #: a turn it corrects, and what an ADD's ``supersedes`` does to the memories it replaces
    RETIRE = "RETIRE"


class Op(BaseModel):
    """One memory operation, as a policy or the API asks for it.

    ADD needs ``text``; UPDATE needs ``target`` and the new ``text``; DELETE needs ``target``;
    NOOP may name the memory it left alone. RETIRE needs ``target`` and may name the memory
    that replaced it (``by``). An ADD's ``supersedes`` lists the memories the new one
    replaces ("we moved to Austin" replaces "lives in Boston"): each is retired, valid until
    the new memory's ``valid_from``, and stays findable as history. Anything else is
    rejected here, before the bank sees it.

    ``expected_version`` (UPDATE / DELETE) is the version of the target the op was decided
    on. When the memory has moved on since (another writer changed it), the batch is a
    `Conflict` and nothing is written: an UPDATE computed from v1's text must never
    overwrite v2 and lose what v2 added. The manager sets it from the memories it was
    shown; the ingest pipeline then re-reads and decides again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: OpType
    target: uuid.UUID | None = None
    text: Text | None = None
    source_turn_ids: tuple[ScopeId, ...] = ()
    metadata: Metadata = Field(default_factory=dict)
    expected_version: int | None = Field(None, ge=1, description="Apply only if the target is still at this version.")
    tier: Tier = Field(Tier.SEMANTIC, description="The tier an ADD writes to; other ops act on their target's tier.")
    speaker: Annotated[str, Strict(), AfterValidator(check_id)] | None = Field(None, description="Who said it (ADD only).")
    occurred_at: datetime | None = Field(None, description="When the content happened, not when it was stored (ADD only).")
    context: Text | None = Field(None, description="What the content follows, indexed with it and never stored or shown (ADD only): an episodic turn's previous turn.")
    context_header: Text | None = Field(
        None, description="How the context's turn is shown (`turn_header`: 'Melanie (on 8 May 2023)'), so its vector is the one that turn was embedded with (ADD with a context only)."
    )
    supersedes: tuple[uuid.UUID, ...] = Field((), description="Memories the new one replaces (ADD only): each is retired, not deleted.")
    by: uuid.UUID | None = Field(None, description="The memory that replaced the target (RETIRE only).")

    @model_validator(mode="after")
    def _shape(self) -> Self:
        needs_target = self.op in (OpType.UPDATE, OpType.DELETE, OpType.RETIRE)
        needs_text = self.op in (OpType.ADD, OpType.UPDATE)
        if needs_target and self.target is None:
            raise ValueError(f"{self.op} needs a target memory id")
        if self.op is OpType.ADD and self.target is not None:
            raise ValueError("ADD must not name a target; the bank assigns the id")
        if needs_text and self.text is None:
            raise ValueError(f"{self.op} needs text")
        if not needs_text and self.text is not None:
            raise ValueError(f"{self.op} must not carry text")
        if self.expected_version is not None and not needs_target:
            raise ValueError(f"{self.op} has no target version to expect")
        if self.supersedes and self.op is not OpType.ADD:
            raise ValueError(f"{self.op} must not set supersedes: only a new memory replaces old ones (RETIRE the target instead)")
        if len(set(self.supersedes)) != len(self.supersedes):
            raise ValueError("supersedes names a memory twice")
        if self.by is not None and self.op is not OpType.RETIRE:
            raise ValueError(f"{self.op} must not set by: it names what replaced a RETIRE's target")
        if self.by is not None and self.by == self.target:
            raise ValueError("a memory cannot replace itself")
        if self.context_header is not None and self.context is None:
            raise ValueError("context_header names how a context is shown: it needs a context")
        if self.op is not OpType.ADD and (self.tier is not Tier.SEMANTIC or self.speaker is not None or self.occurred_at is not None or self.context is not None):
            raise ValueError(f"{self.op} must not set tier, speaker, occurred_at or context: they are fixed when a memory is added")
        return self

    @classmethod
    def add(cls, text: str, **kw: Any) -> Op:
        return cls(op=OpType.ADD, text=text, **kw)

    @classmethod
    def update(cls, target: uuid.UUID | str, text: str, **kw: Any) -> Op:
        return cls(op=OpType.UPDATE, target=target, text=text, **kw)

    @classmethod
    def delete(cls, target: uuid.UUID | str, **kw: Any) -> Op:
        return cls(op=OpType.DELETE, target=target, **kw)

    @classmethod
    def noop(cls, target: uuid.UUID | str | None = None) -> Op:
        return cls(op=OpType.NOOP, target=target)

    @classmethod
    def retire(cls, target: uuid.UUID | str, *, by: uuid.UUID | str | None = None, **kw: Any) -> Op:
        return cls(op=OpType.RETIRE, target=target, by=by, **kw)
