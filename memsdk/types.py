"""The data shapes of the memory bank, declared once and validated at the boundary.

Every model is frozen: a record read from the bank is a value, and a snapshot can share
records with the bank it was taken from without copying them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import unicodedata
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from collections.abc import Callable
from typing import Annotated, Any, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, Strict, ValidationInfo, model_validator

from memsdk.dates import parse_when, render_day, render_when, resolve_relative

__all__ = [
    "Scope",
    "Tier",
    "OpType",
    "Op",
    "EventType",
    "Actor",
    "API_ACTOR",
    "MemoryRecord",
    "HistoryEvent",
    "ScoredMemory",
    "Turn",
    "content_hash",
    "turn_header",
    "split_header",
    "HEADER",
    "shown_when",
    "turn_parts",
    "check_text",
    "check_storable",
    "check_utf8",
    "utcnow",
    "STORED",
]

T = TypeVar("T")

ID_MAX_CHARS = 256
#: the longest question or search query the client accepts
QUESTION_MAX_CHARS = 2000


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_text(value: str) -> str:
    """Reject text no memory should hold: blank, NUL bytes, or lone UTF-16 surrogates.

    Surrogates come from mis-decoded input (``'\\udcff'``); they cannot be encoded as UTF-8,
    so they would fail later, deep inside the store, with a far worse message.
    """
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return check_storable(value)


def check_storable(value: str) -> str:
    """Text that ends up inside a memory's text (a turn's timestamp is rendered into the
    facts extracted from it): no NUL, no lone surrogate; blank is the caller's business."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return check_utf8(value)


def check_utf8(value: str) -> str:
    """Reject a lone UTF-16 surrogate: it cannot be encoded, so the store, the log or BM25
    would fail on it later with a raw ``UnicodeEncodeError``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"is not valid UTF-8 (lone surrogate at index {exc.start})") from None
    return value


def _check_id(value: str) -> str:
    check_text(value)
    if len(value) > ID_MAX_CHARS:
        raise ValueError(f"must be at most {ID_MAX_CHARS} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ValueError("must not contain control characters")
    return value


#: Qdrant stores payload integers as int64; a larger one would come back as a float
MAX_METADATA_INT = 2**63 - 1


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata must survive the store unchanged: no NaN/inf, no integer beyond int64, and
    keys and strings that are valid UTF-8 (a lone surrogate cannot be stored)."""

    def walk(node: Any, path: str) -> None:
        if isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"{path}: {node} is not a JSON number")
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_METADATA_INT:
            raise ValueError(f"{path}: integer beyond 64 bits (store it as a string)")
        if isinstance(node, str):
            try:
                check_utf8(node)
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        if isinstance(node, dict):
            for key, child in node.items():
                walk(key, f"{path} (a key)")
                walk(child, f"{path}.{key}")
        if isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{path}[{i}]")

    walk(value, "metadata")
    return value


#: the validation context of what the bank reads back from its own store: texts, ids and
#: metadata were checked on the way in (an import checks its file first), so a read checks
#: types only. A search decodes a few hundred records, and these checks were three quarters
#: of the decoding (`benchmarks/client.py`'s retrieve)
STORED: dict[str, bool] = {"stored": True}


def _unless_stored(check: Callable[[T], T]) -> Callable[[T, ValidationInfo], T]:
    def validate(value: T, info: ValidationInfo) -> T:
        return value if info.context is STORED else check(value)

    validate.__doc__ = check.__doc__
    return validate


# strict: bytes are not text (pydantic would decode b"..." silently)
Text = Annotated[str, Strict(), AfterValidator(_unless_stored(check_text))]
ScopeId = Annotated[str, AfterValidator(_unless_stored(_check_id))]
Metadata = Annotated[dict[str, JsonValue], AfterValidator(_unless_stored(check_metadata))]


def content_hash(text: str) -> str:
    """sha256 of the text as stored; lets callers spot exact duplicates without reading text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: the "Speaker (on date): " header an episodic turn is shown after and the heuristic
#: extractor copies into a fact; dates contain colons too
HEADER = re.compile(r"^[^:(]{1,80}(\([^)]*\))?:\s*")


def split_header(text: str) -> tuple[str, str]:
    """``text`` as its "Speaker (on date)" header (`HEADER`, without the colon) and the words
    after it; ("", text) when it has none, or nothing after it."""
    found = HEADER.match(text)
    if found is None or found.end() >= len(text):
        return "", text
    return found.group().rstrip().removesuffix(":").rstrip(), text[found.end():]


def turn_header(speaker: str | None, when: str | None) -> str:
    """What an episodic turn is shown after: ``Caroline (on 8 May 2023)``, or the speaker alone
    when the turn has no time (`MemoryRecord.render` puts ": <text>" after it)."""
    head = speaker or "someone"
    return f"{head} (on {when})" if when else head


def shown_when(turn: Turn) -> str | None:
    """A turn's time as its episodic record shows it (`MemoryRecord.render`): as the app wrote
    it, or a datetime the way `render_when` writes one."""
    if isinstance(turn.timestamp, str):
        return turn.timestamp
    when = parse_when(turn.timestamp)
    return render_when(when) if when else None


def turn_parts(turn: Turn) -> tuple[str, str]:
    """A turn as its episodic record is shown, in two: its header and its words (what the bank
    embeds for it: `MemoryRecord.shown_parts`)."""
    return turn_header(turn.speaker, shown_when(turn)), turn.text


@functools.lru_cache(maxsize=4096)
def _scope_key(user_id: str | None, agent_id: str | None, run_id: str | None) -> str:
    # cached: every filter and every decoded record asks for it, ~90 times a retrieve; the
    # encoding took 0.8 of the 6.8 ms a retrieve spent outside the model (100k memories)
    return json.dumps([user_id, agent_id, run_id], ensure_ascii=False)


class Scope(BaseModel):
    """Whose memory this is. A scope is a hard partition keyed by all three fields.

    ``Scope(user_id="alice")`` and ``Scope(user_id="alice", agent_id="support")`` are two
    different partitions: nothing written in one is ever visible from the other.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    run_id: ScopeId | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> Self:
        if self.user_id is None and self.agent_id is None and self.run_id is None:
            raise ValueError("at least one of user_id, agent_id, run_id is required")
        return self

    @property
    def key(self) -> str:
        """An injective string form, used as the partition key inside every store."""
        return _scope_key(self.user_id, self.agent_id, self.run_id)

    def __str__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.model_dump().items() if v is not None]
        return "Scope(" + ", ".join(parts) + ")"


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
    speaker: Annotated[str, Strict(), AfterValidator(_check_id)] | None = Field(None, description="Who said it (ADD only).")
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


class EventType(StrEnum):
    """What a `HistoryEvent` records happened to a memory."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    RESTORE = "RESTORE"
    #: the memory stopped being true (a RETIRE, or an ADD that supersedes it); its text stays
    SUPERSEDE = "SUPERSEDE"


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
        vector is of the record as rendered, mixed with its context's (`MemoryBank._dense_vectors`)."""
        shown = self.render(resolve_dates=False)
        return f"{context}\n{shown}" if context else shown



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


class Turn(BaseModel):
    """One conversation turn as an app hands it to ``ingest``.

    ``turn_id`` links memories back to the turns they came from (LoCoMo's ``D1:3``);
    ``timestamp`` is free text or a datetime, because real apps and LoCoMo both write
    dates like "1:56 pm on 8 May, 2023".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    speaker: ScopeId
    text: Text
    # free text is kept as written (metadata.timestamp) and shown in what is extracted from the turn
    timestamp: datetime | Annotated[str, AfterValidator(check_storable)] | None = None
    turn_id: ScopeId | None = None
