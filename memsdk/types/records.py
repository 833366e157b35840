"""What the bank stores and returns: memory records and their tiers, the audit history's
events and who caused them, and search hits."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from memsdk.dates import render_day, render_when, resolve_relative
from memsdk.types.fields import Metadata, ScopeId, Text
from memsdk.types.scope import Scope
from memsdk.types.turns import split_header, turn_header

__all__ = ["Tier", "MemoryRecord", "EventType", "Actor", "API_ACTOR", "HistoryEvent", "ScoredMemory", "content_hash", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def content_hash(text: str) -> str:
    """sha256 of the text as stored; lets callers spot exact duplicates without reading text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Tier(StrEnum):
    """Which kind of memory a record is (Mem-alpha's and Letta's split; see the README).

    - ``episodic``: one ingested turn, verbatim, with its speaker and time. Written by the
      ingest loop without an LLM, so no model failure can lose a turn; only an explicit
      forget (or the API) deletes one, and nothing rewrites one.
    - ``semantic``: a fact the manager policy maintains (ADD / UPDATE / DELETE / NOOP).
    - ``core``: at most one live summary per scope, bounded in size, always shown to the
      answerer; it is only ever rewritten, never added to a scope that has one.
    """

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    CORE = "core"


class Actor(BaseModel):
    """Who asked for a change: ``api`` (a direct call) or a policy role at a version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: ScopeId = "api"
    version: ScopeId | None = None

    def __str__(self) -> str:
        return self.role if self.version is None else f"{self.role}@{self.version}"


API_ACTOR = Actor()


class MemoryRecord(BaseModel):
    """A memory as stored. ``version`` starts at 1 and grows with every change to it.

    ``occurred_at`` is when the content happened (a turn's timestamp), ``created_at`` when
    the bank stored it. Records stored before tiers existed read back as ``semantic``.

    Validity (Zep's bi-temporal facts): a record is true from ``valid_from`` (when it happened,
    else when it was stored) until ``invalid_at``, set when a later memory replaced it
    (``superseded_by``; None when it was retired without a successor, as a corrected turn
    is). A superseded record is not deleted: it answers "where did she live before?", and
    the answerer sees it marked with its validity. ``current`` is what is true now: live
    and not superseded. A restore reinstates it.

    ``context_hash`` is the content hash of what the record was indexed after (`Op.context`:
    the text of an episodic turn's previous turn, which may belong to another scope of the conversation).
    The context is indexed with the record when it is added (its words BM25-encoded with the
    record's, its turn's vector mixed into the record's) and never stored, so no scope holds another's words; the hash lets an erase of the scope that
    said it find the records it shaped (`MemoryBank.delete_all`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: uuid.UUID
    text: Text
    scope: Scope
    created_at: datetime
    updated_at: datetime
    version: int = Field(ge=1)
    source_turn_ids: tuple[ScopeId, ...] = ()
    metadata: Metadata = Field(default_factory=dict)
    content_hash: str
    deleted: bool = False
    deleted_at: datetime | None = None
    tier: Tier = Tier.SEMANTIC
    speaker: str | None = None
    occurred_at: datetime | None = None
    context_hash: str | None = None
    invalid_at: datetime | None = None
    superseded_by: uuid.UUID | None = None

    @property
    def valid_from(self) -> datetime:
        """When what the record says became true: when it was said, else when it was stored."""
        return self.occurred_at or self.created_at

    @property
    def superseded(self) -> bool:
        """Replaced by a later memory (``invalid_at`` set): history, no longer true."""
        return self.invalid_at is not None

    @property
    def current(self) -> bool:
        """True now: not deleted and not superseded."""
        return not self.deleted and self.invalid_at is None

    def render(self, *, resolve_dates: bool = True) -> str:
        """The record as the answerer sees it: an episodic turn with its speaker and date
        (``Caroline (on 8 May 2023): ...``), a fact or summary as written. With
        ``resolve_dates``, relative dates are followed by the dates they mean, against
        ``occurred_at`` (`memsdk.dates.resolve_relative`). The bank embeds and indexes the
        record without them: the added dates cost retrieval (LoCoMo val recall@10 .709 ->
        .685), while the answerer needs them for "when" questions."""
        text = resolve_relative(self.text, self.occurred_at) if resolve_dates else self.text
        # a superseded record says until when it was true; the index leaves it out (the
        # words said are what a search matches), the answerer needs it for "now" questions
        until = f" (until {render_day(self.invalid_at)})" if resolve_dates and self.invalid_at else ""
        if self.tier is not Tier.EPISODIC:
            return text + until
        return f"{self.shown_parts()[0]}: {text}{until}"

    def shown_parts(self) -> tuple[str, str]:
        """The record as the bank embeds it, in two: its header ("Caroline (on 8 May 2023)",
        or a fact's "Speaker (on date)" prefix; "" when it has none) and its words."""
        if self.tier is Tier.EPISODIC:
            when = self.metadata.get("timestamp") or (self.occurred_at and render_when(self.occurred_at))
            return turn_header(self.speaker, str(when) if when else None), self.text
        return split_header(self.text)

    def index_text(self, context: str | None = None) -> str:
        """What the bank BM25-encodes: the record as rendered without resolved dates (the
        added dates cost retrieval), after ``context`` when it was added with one. The dense
        vector is of the record as rendered, mixed with its context's (`memsdk.bank.indexing`)."""
        shown = self.render(resolve_dates=False)
        return f"{context}\n{shown}" if context else shown


class EventType(StrEnum):
    """What a `HistoryEvent` records happened to a memory."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    RESTORE = "RESTORE"
    #: the memory stopped being true (a RETIRE, or an ADD that supersedes it); its text stays
    SUPERSEDE = "SUPERSEDE"


class HistoryEvent(BaseModel):
    """One entry of the audit history: what changed, from what, to what, by whom, when.

    ``seq`` orders events within a store (timestamps can tie); ``batch_id`` groups the
    events that one ``apply`` wrote together.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: uuid.UUID
    memory_id: uuid.UUID
    scope: Scope
    event: EventType
    before: str | None
    after: str | None
    version: int = Field(ge=1)
    actor: Actor
    at: datetime
    batch_id: uuid.UUID
    seq: int
    tier: Tier = Tier.SEMANTIC
    #: on a SUPERSEDE: the validity it set (events carry no other record fields, but history
    #: replays and `as_of` need these to rebuild what was current when)
    invalid_at: datetime | None = None
    superseded_by: uuid.UUID | None = None


class ScoredMemory(BaseModel):
    """A search hit: the record and its cosine similarity to the query."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    score: float
