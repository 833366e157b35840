"""MemoryBank: scoped records, their audit history, search, snapshots, export/import.

Every change goes through `transition.plan` (or `plan_restore`) and one `_commit`; every
read builds its `Where` from the caller's scope.

Locking: a write to a scope holds that scope's lock (one of ``lock_stripes`` striped locks)
for its whole read-plan-write cycle, so two threads applying ops to the same scope never
interleave; writes to different scopes overlap, embedding and planning included. Only the
engine write itself (`_store_lock`) and the history sequence counter (`_seq_lock`) are
global. `delete_all` takes every stripe: its purge rewrites whole shards. Reads take no
lock (the transports serve reads beside a write, as they did under the old bank-wide lock).

Inside the scope's lock a write takes the scope's lease in the store (`StoreTransport.lease`),
so processes that share a store (several app servers on one Qdrant server) serialise a
scope's read-plan-write cycles as threads do; an op decided on a version another writer has
since replaced is a `Conflict` (``Op.expected_version``), never a lost update. `delete_all`
takes no lease: it is an operator's command for a store nobody else is writing.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, IO

import builtins
import numpy as np
import socket
import zlib
from pydantic import ValidationError

from memsdk.bank import codec
from memsdk.bank.history import events_until, replay
from memsdk.bank.snapshot import BankSnapshot
from memsdk.bank.transition import BankLimits, Transition, plan, plan_restore
from memsdk.embedding.base import Embedder
from memsdk.embedding.bm25 import Bm25Encoder
from memsdk.errors import Conflict, EmbedderError, ImportConflict, InvalidInput, MemoryNotFound, ScopeRequired
from memsdk.store.base import Point, StoreTransport, Where
from memsdk.store.memory import InMemoryTransport
from memsdk.types import Actor, API_ACTOR, EventType, HistoryEvent, MemoryRecord, Op, OpType, Scope, ScoredMemory, Tier, check_text, content_hash, utcnow


__all__ = ["MemoryBank", "as_scope", "as_memory_id", "as_query"]

ScopeLike = Scope | dict[str, Any]
#: writes to scopes on different stripes run in parallel; two scopes sharing one only wait
#: for each other (a fixed count keeps memory flat however many scopes a store holds)
LOCK_STRIPES = 64
#: `scopes`' largest limit: the engine's facet takes a machine-size integer (2**64 was a StoreError)
MAX_SCOPES_LIMIT = 2**31 - 1
#: turns `adjacent` returns each way: a hash names several turns only when a text repeats
#: ("ok"), and the turn wanted is the latest stored before the record (or the first after)
ADJACENT_LIMIT = 256


def as_scope(value: object, field: str = "scope") -> Scope:
    """Validate a scope given as a `Scope` or a dict (any other value is `InvalidInput`: apps
    pass what they were given); errors name the field."""
    if isinstance(value, Scope):
        return value
    if value is None or value == {}:
        raise ScopeRequired(field)
    if not isinstance(value, dict):
        raise InvalidInput(field, f"expected a Scope or a dict, got {type(value).__name__}")
    try:
        return Scope.model_validate(value)
    except ValidationError as exc:
        if any(e["type"] == "value_error" and not e["loc"] for e in exc.errors()):
            raise ScopeRequired(field) from None
        raise InvalidInput.from_pydantic(exc, field) from None


def _scope_of_key(key: str) -> Scope:
    """The inverse of `Scope.key`."""
    return Scope(**dict(zip(("user_id", "agent_id", "run_id"), json.loads(key))))


def as_memory_id(value: uuid.UUID | str, field: str = "memory_id") -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not a memory id (a UUID)") from None


def as_moment(value: datetime | uuid.UUID, field: str = "when") -> datetime | uuid.UUID:
    """A point in a scope's history: a timezone-aware time, or a history event's id."""
    if isinstance(value, datetime) and value.tzinfo is None:  # history times are UTC; a naive one would raise TypeError
        raise InvalidInput(field, "must be a timezone-aware datetime")
    if not isinstance(value, (datetime, uuid.UUID)):
        raise InvalidInput(field, f"expected a datetime or a history event id (UUID), got {type(value).__name__}")
    return value


def _count(field: str, value: Any, *, low: int, high: int | None = None) -> int:
    """An integer argument (limit, offset) in [low, high]; anything else is `InvalidInput`.
    A negative offset or limit would slice from the end, silently returning the wrong records."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise InvalidInput(field, f"must be between {low} and {high}" if high is not None else f"must be at least {low}, got {value}")
    return value


def as_tier(value: Tier | str | None, field: str = "tier") -> str | None:
    """A tier name for a store filter (None: every tier); an unknown one is `InvalidInput`."""
    if value is None:
        return None
    try:
        return Tier(value).value
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not a tier; expected one of {[t.value for t in Tier]}") from None


def as_query(value: Any, field: str = "query") -> str:
    """A search query or question: text BM25 and the interaction log can encode."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a non-empty string, got {type(value).__name__}")
    try:
        return check_text(value)
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None


def as_shown(value: Any) -> list[tuple[str, str]]:
    """(header, words) pairs as `MemoryBank.shown_vectors` embeds them: words a query could
    be, a header too or "" (none)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInput("shown", f"must be a sequence of (header, words) pairs, got {type(value).__name__}")
    pairs = []
    for i, pair in enumerate(value):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidInput(f"shown[{i}]", "must be a (header, words) pair")
        head, words = pair
        pairs.append(("" if head == "" else as_query(head, f"shown[{i}][0]"), as_query(words, f"shown[{i}][1]")))
    return pairs


def as_ops(ops: Iterable[Op | dict[str, Any]]) -> list[Op]:
    if isinstance(ops, (Op, dict)) or not isinstance(ops, Iterable):
        raise InvalidInput("ops", f"expected a list of ops, got {type(ops).__name__}")
    out = []
    for i, op in enumerate(ops):
        if isinstance(op, Op):
            out.append(op)
            continue
        try:
            out.append(Op.model_validate(op))
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, f"ops[{i}]") from None
    return out


#: an episodic turn's vector is unit(own + CONTEXT_WEIGHT x its previous turn's): LoCoMo's
#: questions often quote what a reply answers, so a reply is found by its question's words.
#: Embedding "<previous turn>\n<turn>" as one text did that at one more MiniLM pass per turn
#: (the previous turn's own vector is already made); heuristic ingest, recall@10/@30/@60:
#: train .766/.836/.939 -> .772/.843/.946, val .787/.886/.951 -> .787/.886/.955 (.3: within .01)
CONTEXT_WEIGHT = 0.5
#: A memory is embedded as its words and its "Speaker (on day)" header apart, the header
#: mixed in at this weight: a header is embedded once per speaker and day (the client's cache
#: answers the rest), so an ingest is one embedding of the turn's words, which the fact that
#: copies it and the pair manager (which reads the words alone) reuse. Heuristic ingest,
#: LoCoMo recall@10/@30/@60 against "header: words" as one text (train .772/.839/.946, val
#: .775/.886/.957), with the clock time still in the header: .5 train .774/.861/.933, val
#: .780/.878/.961; .8 .783/.858/.940, .791/.880/.955; 1.0 .783/.864/.948, .787/.899/.955; 1.5
#: .783/.867/.964, .787/.899/.955; without it (`_CLOCK`), 1.0: .780/.871/.965, .803/.893/.951.
#: 1.0 rather than more: weight on who spoke serves LoCoMo, whose questions name the speaker,
#: more than it would serve an app.
HEADER_WEIGHT = 1.0


#: the clock time in a header ("Caroline (on 1:56 pm on 8 May, 2023)"), left out of what is
#: embedded: a header per speaker and day is embedded once a day, one per minute would cost
#: an app that stamps each turn a second text per turn, and no question asks for the minute
_CLOCK = re.compile(r"\(on \d{1,2}[:.]\d{2}\s*(?:[ap]\.?m\.?)?\s+on\s+", re.I)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


@dataclass(frozen=True, slots=True)
class Context:
    """What an episodic turn follows (`Op.context`): its words, for BM25 and the hash that
    links the two turns, and with its header, for the dense vector."""

    words: str
    header: str

    @property
    def parts(self) -> tuple[str, str]:
        """As `MemoryRecord.shown_parts` splits a turn: the previous turn's own vector."""
        return self.header, self.words

    @classmethod
    def of(cls, op: Op) -> Context:
        return cls(op.context or "", op.context_header or "")


class MemoryBank:
    """The memory of many scopes in one store.

    ``MemoryBank.open(path)`` is the embedded default; ``MemoryBank.open(":memory:")`` keeps
    it in this process's memory; ``MemoryBank.open("http://qdrant:6333")`` uses qdrant-client. Any `StoreTransport` can be
    passed to the constructor directly.
    """

    def __init__(
        self,
        transport: StoreTransport,
        embedder: Embedder,
        *,
        limits: BankLimits = BankLimits(),
        clock: Callable[[], Any] = utcnow,
        lock_stripes: int = LOCK_STRIPES,
    ) -> None:
        """``lock_stripes=1`` serialises all writes behind one lock (the bank before per-scope
        locking; `benchmarks/load.py` uses it as its baseline)."""
        if transport.dim != embedder.dim:
            raise InvalidInput("embedder", f"makes {embedder.dim}-d vectors, the store holds {transport.dim}-d")
        self.transport = transport
        self.embedder = embedder
        self.limits = limits
        self._clock = clock
        _count("lock_stripes", lock_stripes, low=1)
        self._scope_locks = [threading.RLock() for _ in range(lock_stripes)]
        # the transports are not safe for two writers at once (EdgeTransport counts unindexed
        # vectors and starts its index build in Python), so engine writes stay one at a time
        self._store_lock = threading.Lock()
        self._seq_lock = threading.Lock()
        self._seq = 0
        # who this bank is to other processes writing the same store (the lease's owner), and
        # how deep this process is inside each scope's lease (the stripe lock is reentrant)
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._leased: dict[str, int] = {}
        self._bm25: Bm25Encoder | None = None

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        limits: BankLimits = BankLimits(),
        api_key: str | None = None,
    ) -> MemoryBank:
        from memsdk.embedding.minilm import SentenceTransformerEmbedder
        from memsdk.store import open_transport

        embedder = embedder or SentenceTransformerEmbedder()
        return cls(open_transport(location, dim=embedder.dim, api_key=api_key), embedder, limits=limits)

    # -- writes ---------------------------------------------------------------------------

    def apply(self, scope: ScopeLike, ops: Iterable[Op | dict[str, Any]], *, actor: Actor = API_ACTOR) -> Transition:
        """Apply a batch of ops atomically: all of them, or (on any error) none.

        A deleted episodic turn (a forget, a correction, `delete`) also leaves the indexes of the
        turns that were indexed after it (`_unquote`), in its scope and its conversation's
        other scopes: a search for what was forgotten must not find the reply that followed
        it. That is done after the batch commits; a restore does not put it back."""
        scope = as_scope(scope)
        ops = as_ops(ops)
        targets = {str(i) for op in ops for i in (op.target, op.by, *op.supersedes) if i is not None}
        with self._writing(scope):
            current = {p.id: p for p in self.transport.scroll(codec.memories(scope, ids=frozenset(targets)), with_vectors=True)} if targets else {}
            if any(op.op is OpType.ADD and op.tier is Tier.CORE for op in ops):  # the planner checks there is no live one
                current |= {p.id: p for p in self.transport.scroll(codec.memories(scope, tier=Tier.CORE.value, deleted=False), with_vectors=True)}
            state = {uuid.UUID(pid): codec.decode_record(p) for pid, p in current.items()}
            transition = plan(state, ops, scope=scope, actor=actor, now=self._clock(), seq=self._next_seq(), limits=self.limits)
            vectors = {pid: p.vector for pid, p in current.items()}
            # a context is indexed with the record it came with and stored nowhere
            contexts = {c.after.id: Context.of(ops[c.index]) for c in transition.changes if c.op is OpType.ADD and c.after is not None and ops[c.index].context}
            self._commit(transition, vectors, contexts)
            forgotten = {content_hash(r.text) for r in transition.deleted_turns}
            if forgotten:
                self._unquote(forgotten, [scope])
        if forgotten and scope.run_id is not None:
            # each sibling under its own lock, taken after this one is let go: holding two
            # stripes at once could deadlock against a sibling forgetting the other way. A kill
            # in between leaves a sibling's stale index (never a lost record) until an erase.
            for sibling in self._siblings(scope):
                with self._writing(sibling):
                    self._unquote(forgotten, [sibling])
        return transition

    def restore(self, scope: ScopeLike, memory_id: uuid.UUID | str, *, actor: Actor = API_ACTOR) -> MemoryRecord:
        """Undo a soft delete, else a supersession; the record comes back (current, for a
        superseded one) at a new version, with a RESTORE event."""
        scope = as_scope(scope)
        mid = as_memory_id(memory_id)
        with self._writing(scope):
            points = list(self.transport.scroll(codec.memories(scope, ids=frozenset({str(mid)})), with_vectors=True))
            if not points:
                raise MemoryNotFound(mid)
            live_core = next(iter(self.transport.scroll(codec.memories(scope, tier=Tier.CORE.value, deleted=False))), None)
            core = None if live_core is None else codec.decode_record(live_core)
            transition = plan_restore(codec.decode_record(points[0]), actor=actor, now=self._clock(), seq=self._next_seq(), live_core=core)
            self._commit(transition, {points[0].id: points[0].vector})
        return transition.records[0]

    @property
    def bm25(self) -> Bm25Encoder:
        """The BM25 encoder of the sparse vectors (hybrid search), built on first use."""
        if self._bm25 is None:  # built on first use: `import memsdk` must not load the engine
            self._bm25 = Bm25Encoder()
        return self._bm25

    @contextmanager
    def _writing(self, scope: Scope) -> Iterator[None]:
        """Hold ``scope``'s write lock, then its lease in the store: its read-plan-write cycles
        run one at a time, among this process's threads and among processes sharing the store."""
        key = scope.key
        with self._scope_locks[zlib.crc32(key.encode()) % len(self._scope_locks)]:
            depth = self._leased.get(key, 0)  # only this thread touches it: it holds the stripe
            lease = self.transport.lease(f"scope:{key}", self._owner) if depth == 0 else nullcontext()
            with lease:
                self._leased[key] = depth + 1
                try:
                    yield
                finally:
                    if depth:
                        self._leased[key] = depth
                    else:
                        del self._leased[key]

    @contextmanager
    def _writing_all(self) -> Iterator[None]:
        """Hold every scope's write lock, taken in stripe order (so two callers cannot deadlock)."""
        with ExitStack() as stack:
            for lock in self._scope_locks:
                stack.enter_context(lock)
            yield

    def _next_seq(self) -> int:
        # Wall-clock nanoseconds keep the order across restarts; max() keeps it strict
        # within a process when the clock stalls or steps back. Per scope, seqs also follow
        # the commit order, since the scope's lock is held from here to the commit.
        with self._seq_lock:
            self._seq = max(self._seq + 1, time.time_ns())
            return self._seq

    def _advance_seq(self, seqs: Iterable[int]) -> None:
        with self._seq_lock:
            self._seq = max([self._seq, *seqs])

    def _commit(self, transition: Transition, vectors: dict[str, np.ndarray | None], contexts: dict[uuid.UUID, Context] | None = None) -> None:
        # only new text needs a new vector; a delete or restore keeps the stored one (its
        # context included; the BM25 half is encoded afresh, from the record's own words)
        reembed = {str(e.memory_id) for e in transition.events if e.event in (EventType.ADD, EventType.UPDATE)}
        points = self._record_points(transition.records, {pid: v for pid, v in vectors.items() if pid not in reembed}, contexts)
        points += [codec.event_point(e) for e in transition.events]
        with self._store_lock:
            self.transport.upsert(points)  # one engine operation: records and their history together
        self._advance_seq(e.seq for e in transition.events[-1:])

    def _record_points(
        self, records: Sequence[MemoryRecord], vectors: dict[str, np.ndarray | None] | None = None, contexts: dict[uuid.UUID, Context] | None = None
    ) -> list[Point]:
        """``records`` as store points, indexed the way every search expects. BM25 reads the
        record's `index_text` (rendered without resolved dates, after its context's words, if
        it has one in ``contexts``). The dense vector is of the record as shown, header and
        words apart (`_dense_vectors`). A record whose id is in ``vectors`` keeps that vector
        instead of being embedded again."""
        vectors, contexts = dict(vectors or {}), contexts or {}
        fresh = [r for r in records if str(r.id) not in vectors]
        vectors |= {str(r.id): v for r, v in zip(fresh, self._dense_vectors(fresh, contexts))}
        # BM25 costs microseconds, so every written record gets its sparse vector afresh
        return [codec.record_point(r, vectors[str(r.id)], self.bm25.document(r.index_text(c.words if (c := contexts.get(r.id)) else None))) for r in records]

    def _dense_vectors(self, records: Sequence[MemoryRecord], contexts: dict[uuid.UUID, Context] | None = None) -> np.ndarray:
        """The dense vectors of ``records``: each as shown (`shown_vectors` of its header and
        words, without resolved dates), and for one with a context, unit(own + `CONTEXT_WEIGHT`
        x the context's turn as shown). One embedder call for all of them; texts repeat, so a
        cached embedder answers the context (the previous turn, embedded when it was ingested),
        the headers, and a fact that copies its turn: one embedding per ingested turn."""
        contexts = contexts or {}
        said = {r.id: c.parts for r in records if (c := contexts.get(r.id))}
        # records and ops were validated when made: no second check on the write path
        vectors = self._shown_vectors([*(r.shown_parts() for r in records), *said.values()])
        out, after = vectors[: len(records)], dict(zip(said, vectors[len(records) :]))
        for i, r in enumerate(records):
            if r.id in after:
                out[i] = _unit(out[i] + CONTEXT_WEIGHT * after[r.id])
        return out

    def shown_vectors(self, shown: Sequence[tuple[str, str]], embedder: Embedder | None = None) -> np.ndarray:
        """The dense vector of each (header, words) the way the bank embeds a memory:
        unit(words + `HEADER_WEIGHT` x header), the words alone without a header. One
        ``embedder`` call (default: the bank's) for the distinct texts; a header, its clock
        time left out (`_CLOCK`), repeats for every turn of a speaker on a day, so a cached
        embedder makes it free."""
        return self._shown_vectors(as_shown(shown), embedder)

    def _shown_vectors(self, shown: Sequence[tuple[str, str]], embedder: Embedder | None = None) -> np.ndarray:
        shown = [(_CLOCK.sub("(on ", head), words) for head, words in shown]
        texts = list(dict.fromkeys(t for parts in shown for t in parts if t))
        embedded, row = self._embed(texts, embedder), {text: i for i, text in enumerate(texts)}
        out = embedded[[row[words] for _, words in shown]] if shown else embedded
        for i, (head, _) in enumerate(shown):
            if head:
                out[i] = _unit(out[i] + HEADER_WEIGHT * embedded[row[head]])
        return out

    def _embed(self, texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        vectors = (embedder or self.embedder).embed(texts)
        if vectors.shape != (len(texts), self.embedder.dim) or not np.isfinite(vectors).all():
            raise EmbedderError(f"embedder returned {vectors.shape} (or non-finite values) for {len(texts)} texts")
        return vectors

    def delete_all(self, scope: ScopeLike) -> int:
        """Erase a scope for good: records, history, and their bytes on disk. Returns the record count.

        The scope's turns also leave the indexes they shaped: an episodic turn of another scope
        of the same conversation (same ``run_id``) that was indexed after one of them (its
        ``context_hash`` names it) is indexed again from its own words, first, so a kill at
        any point leaves the scope whole or gone, and a retry finishes."""
        scope = as_scope(scope)
        # every stripe, not just this scope's: the purge copies whole shards (the shared one
        # too) and swaps them in, which must not happen under another scope's read-plan-write cycle
        with self._writing_all():
            n = self.transport.count(codec.memories(scope))
            said = {content_hash(r.text) for r in self._scroll_records(codec.memories(scope, tier=Tier.EPISODIC.value))}
            if said and scope.run_id is not None:  # without a run_id a context comes from the scope itself
                self._unquote(said, self._siblings(scope))
            with self._store_lock:
                self.transport.delete(codec.scope_points(scope))  # one operation: a crash leaves all or none
                self.transport.purge()
        return n

    def _siblings(self, scope: Scope) -> list[Scope]:
        """The other scopes of ``scope``'s conversation (its ``run_id``), soft-deleted ones included."""
        keys = self.transport.scope_keys(MAX_SCOPES_LIMIT, include_deleted=True, run_id=scope.run_id)
        return [s for k in keys if (s := _scope_of_key(k)) != scope]

    def _unquote(self, said: set[str], scopes: Iterable[Scope]) -> None:
        """Index again from their own words the episodic records of ``scopes`` that were indexed
        after a text whose content hash is in ``said``; no history event: events never held it.
        A scan of each scope's episodic tier: forgets and erases are rare, a scope's turns few."""
        quoting = [r for s in scopes for r in self._scroll_records(codec.memories(s, tier=Tier.EPISODIC.value)) if r.context_hash in said]
        if quoting:
            points = self._record_points([r.model_copy(update={"context_hash": None}) for r in quoting])
            with self._store_lock:
                self.transport.upsert(points)

    def _scroll_records(self, where: Where) -> Iterator[MemoryRecord]:
        return (codec.decode_record(p) for p in self.transport.scroll(where))

    erase = delete_all

    # -- reads ----------------------------------------------------------------------------

    def get(self, scope: ScopeLike, memory_id: uuid.UUID | str, *, include_deleted: bool = False) -> MemoryRecord:
        """The memory ``memory_id`` of ``scope``. `MemoryNotFound` when the scope holds no such
        memory (or only a deleted one, unless ``include_deleted``); `InvalidInput` for a
        malformed id or scope."""
        scope = as_scope(scope)
        mid = as_memory_id(memory_id)
        where = codec.memories(scope, ids=frozenset({str(mid)}), deleted=None if include_deleted else False)
        for point in self.transport.scroll(where):
            return codec.decode_record(point)
        raise MemoryNotFound(mid)

    # from here on `list` in an annotation names this method: the builtin is builtins.list
    def list(self, scope: ScopeLike, *, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> list[MemoryRecord]:
        """Records of a scope (of one tier, or all), oldest first."""
        scope = as_scope(scope)
        offset = _count("offset", offset, low=0)
        limit = None if limit is None else _count("limit", limit, low=0)
        where = codec.memories(scope, deleted=None if include_deleted else False, tier=as_tier(tier))
        records = sorted((codec.decode_record(p) for p in self.transport.scroll(where)), key=lambda r: (r.created_at, str(r.id)))
        return records[offset : None if limit is None else offset + limit]

    def adjacent(self, scope: ScopeLike, records: Iterable[MemoryRecord]) -> builtins.list[MemoryRecord]:
        """The live episodic turns of ``scope`` said right before or right after one of
        ``records`` (turns of this scope or of another of the conversation). A turn's
        `MemoryRecord.context_hash` is the content hash of the turn before it, so a turn before a
        record has the record's context hash as its content hash, and a turn after it has the
        record's content hash as its context hash. Text repeats ("Thanks!"), so one hash may name
        several turns: the caller tells them apart by ``created_at`` (`memsdk.pipeline.retrieval.next_turn`).
        At most `ADJACENT_LIMIT` turns each way, the latest stored."""
        scope = as_scope(scope)
        records = builtins.list(records)
        said = frozenset(h for r in records if (h := r.context_hash) is not None)
        heard = frozenset(r.content_hash for r in records)
        found: dict[uuid.UUID, MemoryRecord] = {}
        for where in (
            codec.memories(scope, deleted=False, tier=Tier.EPISODIC.value, content_hashes=said) if said else None,
            codec.memories(scope, deleted=False, tier=Tier.EPISODIC.value, context_hashes=heard) if heard else None,
        ):
            if where is not None:
                turns = sorted(self._scroll_records(where), key=lambda r: r.created_at)[-ADJACENT_LIMIT:]
                found.update((r.id, r) for r in turns)
        return sorted(found.values(), key=lambda r: (r.created_at, str(r.id)))

    def scopes(self, *, limit: int = 100_000) -> builtins.list[Scope]:
        """Every scope that holds a live memory, ordered by key; ids only, never content.
        More than ``limit`` of them is an `InvalidInput` rather than a partial answer: the
        engine ranks them by size, so a cut would silently drop the smallest."""
        limit = _count("limit", limit, low=1, high=MAX_SCOPES_LIMIT)
        keys = self.transport.scope_keys(limit + 1)
        if len(keys) > limit:
            raise InvalidInput("limit", f"more than {limit} scopes hold memories; pass a higher limit")
        return [_scope_of_key(k) for k in sorted(keys)]

    def count(self, scope: ScopeLike, *, include_deleted: bool = False, tier: Tier | str | None = None, turn_id: str | None = None) -> int:
        """How many memories ``scope`` holds (of ``tier``; deleted ones too with ``include_deleted``;
        only those that came from the turn ``turn_id``, an indexed lookup)."""
        turns = None if turn_id is None else frozenset({as_query(turn_id, "turn_id")})
        return self.transport.count(codec.memories(as_scope(scope), deleted=None if include_deleted else False, tier=as_tier(tier), turn_ids=turns))

    def search(self, scope: ScopeLike, query: str, *, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> builtins.list[ScoredMemory]:
        """The live memories nearest to ``query``. Dense: the score is a cosine similarity.
        ``hybrid``: dense and BM25 rankings fused by rank inside the engine (names, numbers
        and rare words count), and the score is the fused one (higher is better, not a cosine)."""
        query = as_query(query)
        scope = as_scope(scope)
        return self.search_vector(scope, self._embed([query])[0], limit=limit, tier=tier, text=query if hybrid else None)

    def search_vector(self, scope: ScopeLike, vector: np.ndarray, *, limit: int = 10, tier: Tier | str | None = None, text: str | None = None) -> builtins.list[ScoredMemory]:
        """`search` with the query already embedded; ``text`` (the query's words) makes it hybrid."""
        scope = as_scope(scope)
        _count("limit", limit, low=1, high=self.limits.max_search_limit)
        if not isinstance(vector, np.ndarray) or vector.shape != (self.embedder.dim,) or not np.isfinite(vector).all():
            # the engine would answer a wrong shape with a StoreError and NaN with arbitrary hits
            raise InvalidInput("vector", f"must be a finite {self.embedder.dim}-d numpy array")
        sparse = None if text is None else self.bm25.query(as_query(text, "text"))
        hits = self.transport.search(vector, codec.memories(scope, deleted=False, tier=as_tier(tier)), limit, sparse=sparse)
        return [ScoredMemory(record=codec.decode_record(h.point), score=h.score) for h in hits]

    def history(self, scope: ScopeLike, memory_id: uuid.UUID | str | None = None) -> builtins.list[HistoryEvent]:
        """Audit events of a scope (or of one memory in it), in the order they happened."""
        scope = as_scope(scope)
        mid = None if memory_id is None else str(as_memory_id(memory_id))
        found = [codec.decode_event(p) for p in self.transport.scroll(codec.events(scope, memory_id=mid))]
        if memory_id is not None and not found:
            raise MemoryNotFound(memory_id)
        return sorted(found, key=lambda e: e.seq)

    # -- snapshots and export -------------------------------------------------------------

    def snapshot(self, scope: ScopeLike) -> BankSnapshot:
        """A frozen copy of ``scope``'s records and history (`BankSnapshot`): what a trainer
        forks rollouts from; later writes to the bank do not change it."""
        scope = as_scope(scope)
        points = list(self.transport.scroll(codec.memories(scope), with_vectors=True))
        points += list(self.transport.scroll(codec.events(scope)))
        return BankSnapshot(scope, tuple(points), self.embedder.dim)

    def as_of(self, scope: ScopeLike, when: datetime | uuid.UUID, *, inclusive: bool = True) -> BankSnapshot:
        """The scope as it stood at ``when``, rebuilt from its audit history.

        ``when`` is a timezone-aware time (every event stamped up to it counts) or the id of
        one of the scope's history events (that event and the ones before it);
        ``inclusive=False`` is the scope just before it. The snapshot holds those events and
        the records as they left them, deleted ones included, so `BankSnapshot.violations`
        holds for it and a fork of it carries on the same history. Its records are indexed
        afresh the way this bank indexes them, so a fork searches as the bank did then.
        Metadata, source turns and speakers are the records' current ones: events do not
        keep them. An id that is no event of this scope is `InvalidInput`.
        """
        scope, when = as_scope(scope), as_moment(when)
        events = events_until(self.history(scope), when, inclusive=inclusive)
        current = {r.id: r for r in self.list(scope, include_deleted=True)}
        points = self._record_points(replay(events, current)) + [codec.event_point(e) for e in events]
        return BankSnapshot(scope, tuple(points), self.embedder.dim)

    def fork(self, scope: ScopeLike) -> MemoryBank:
        """An isolated in-memory copy of one scope: writes to it never reach this bank."""
        return MemoryBank.from_snapshot(self.snapshot(scope), self.embedder, limits=self.limits)

    @classmethod
    def from_snapshot(cls, snapshot: BankSnapshot, embedder: Embedder, *, limits: BankLimits = BankLimits()) -> MemoryBank:
        """A bank in memory holding ``snapshot``, to write to without touching where it came
        from (a rollout). ValueError when ``embedder`` makes vectors of another size than the
        snapshot's."""
        if embedder.dim != snapshot.dim:
            raise ValueError(f"snapshot holds {snapshot.dim}-d vectors, the embedder makes {embedder.dim}-d")
        return cls(InMemoryTransport(snapshot.dim, snapshot.points), embedder, limits=limits)

    def export(self, scope: ScopeLike, dest: str | os.PathLike[str] | IO[str]) -> int:
        """Write ``scope``'s records and history as JSONL to ``dest`` (a path or an open text
        file), exact enough for `import_` to rebuild them; returns the lines written."""
        from memsdk.bank.export import export_scope

        return export_scope(self, as_scope(scope), dest)

    def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        """Load an export into ``scope`` (default: the scope it came from); returns the record count.

        Nothing is written unless the whole file parses and its history explains its records
        (`export.check_consistent`). Into the scope it came from, ids are kept (an exact round
        trip), so a file whose ids exist already is an `ImportConflict` (which names no id:
        it must not confirm that an id lives in another scope). Into another scope, every
        record and event gets a fresh id, so a scope can be copied within one store.
        """
        from memsdk.bank.export import read_export

        source, records, events = read_export(src)
        target = source if scope is None else as_scope(scope)
        for i, r in enumerate(records):
            if r.scope != source:
                raise InvalidInput(f"records[{i}].scope", "differs from the header's scope")
            most = self.limits.max_core_chars if r.tier is Tier.CORE else self.limits.max_text_chars
            if len(r.text) > most:
                raise InvalidInput(f"records[{i}].text", f"is {len(r.text)} characters, the limit is {most}")
        # the core tier's rule (one live core memory per scope), for the file and the target
        cores = [r for r in records if r.tier is Tier.CORE and not r.deleted]
        if len(cores) > 1:
            raise InvalidInput("file", f"holds {len(cores)} live core memories; a scope has at most one")
        ids = [str(r.id) for r in records] + [str(e.id) for e in events]
        if len(set(ids)) != len(ids):
            raise InvalidInput("file", "contains duplicate ids")
        if target == source:
            records = [r.model_copy(update={"scope": target}) for r in records]
            events = [e.model_copy(update={"scope": target}) for e in events]
        else:
            fresh: dict[uuid.UUID, uuid.UUID] = {}
            renew = lambda old: fresh.setdefault(old, uuid.uuid4())  # noqa: E731
            # a successor named by a record or an event is renewed with the record it names
            succ = lambda old: None if old is None else renew(old)  # noqa: E731
            records = [r.model_copy(update={"scope": target, "id": renew(r.id), "superseded_by": succ(r.superseded_by)}) for r in records]
            events = [e.model_copy(update={"scope": target, "id": renew(e.id), "memory_id": renew(e.memory_id), "batch_id": renew(e.batch_id), "superseded_by": succ(e.superseded_by)}) for e in events]
            ids = [str(r.id) for r in records] + [str(e.id) for e in events]
        # the target's lock suffices: ids are only kept when importing into the source scope,
        # so two imports that could collide on ids take the same lock
        with self._writing(target):
            taken = self.transport.existing_ids(ids)
            if taken:
                raise ImportConflict("ids", f"{len(taken)} of this file's ids already exist in the store (import it into another scope for fresh ids); nothing was imported")
            if cores and self.count(target, tier=Tier.CORE):
                raise Conflict("scope", "already has a core memory and the file holds one; delete one of them first; nothing was imported")
            points = self._record_points(records)
            with self._store_lock:
                self.transport.upsert(points + [codec.event_point(e) for e in events])
            self._advance_seq(e.seq for e in events)
        return len(records)

    def close(self) -> None:
        """Close the store; the bank is not used after (the client closes the bank it opened)."""
        self.transport.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
