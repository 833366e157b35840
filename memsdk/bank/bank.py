"""`MemoryBank`, the memory of many scopes in one store: its writes, reads, snapshots,
export and import.

Every change goes through `transition.plan` (or `plan_restore`) and one `_commit`; every
read builds its `Where` from the caller's scope. The bank leans on its siblings for the rest:
the arguments are checked by `inputs`, records and queries are embedded by `indexing`,
writes are locked and ordered by `locking` (whose docstring says how), and an export's file
is read and checked by `export`.
"""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, IO

import numpy as np

from memsdk.bank import codec
from memsdk.bank.history import events_until, replay
from memsdk.bank.indexing import Context, Indexer
from memsdk.bank.inputs import ScopeLike, as_count, as_memory_id, as_moment, as_ops, as_query, as_scope, as_shown, as_tier, scope_of_key
from memsdk.bank.locking import LOCK_STRIPES, WriteLocks
from memsdk.bank.snapshot import BankSnapshot
from memsdk.bank.transition import BankLimits, Transition, plan, plan_restore
from memsdk.embedding.base import Embedder
from memsdk.embedding.bm25 import Bm25Encoder
from memsdk.errors import Conflict, ImportConflict, InvalidInput, MemoryNotFound
from memsdk.store.base import StoreTransport, Where
from memsdk.store.memory import InMemoryTransport
from memsdk.types import Actor, API_ACTOR, EventType, HistoryEvent, MemoryRecord, Op, OpType, Scope, ScoredMemory, Tier, content_hash, utcnow


__all__ = ["MemoryBank", "as_scope", "as_memory_id", "as_query"]

#: `scopes`' largest limit: the engine's facet takes a machine-size integer (2**64 was a StoreError)
MAX_SCOPES_LIMIT = 2**31 - 1
#: turns `adjacent` returns each way: a hash names several turns only when a text repeats
#: ("ok"), and the turn wanted is the latest stored before the record (or the first after)
ADJACENT_LIMIT = 256


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
        self._locks = WriteLocks(transport, as_count("lock_stripes", lock_stripes, low=1))
        self._index = Indexer(embedder)

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
        with self._locks.writing(scope):
            current = {p.id: p for p in self.transport.scroll(codec.memories(scope, ids=frozenset(targets)), with_vectors=True)} if targets else {}
            if any(op.op is OpType.ADD and op.tier is Tier.CORE for op in ops):  # the planner checks there is no live one
                current |= {p.id: p for p in self.transport.scroll(codec.memories(scope, tier=Tier.CORE.value, deleted=False), with_vectors=True)}
            state = {uuid.UUID(pid): codec.decode_record(p) for pid, p in current.items()}
            transition = plan(state, ops, scope=scope, actor=actor, now=self._clock(), seq=self._locks.next_seq(), limits=self.limits)
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
                with self._locks.writing(sibling):
                    self._unquote(forgotten, [sibling])
        return transition

    def restore(self, scope: ScopeLike, memory_id: uuid.UUID | str, *, actor: Actor = API_ACTOR) -> MemoryRecord:
        """Undo a soft delete, else a supersession; the record comes back (current, for a
        superseded one) at a new version, with a RESTORE event."""
        scope = as_scope(scope)
        mid = as_memory_id(memory_id)
        with self._locks.writing(scope):
            points = list(self.transport.scroll(codec.memories(scope, ids=frozenset({str(mid)})), with_vectors=True))
            if not points:
                raise MemoryNotFound(mid)
            live_core = next(iter(self.transport.scroll(codec.memories(scope, tier=Tier.CORE.value, deleted=False))), None)
            core = None if live_core is None else codec.decode_record(live_core)
            transition = plan_restore(codec.decode_record(points[0]), actor=actor, now=self._clock(), seq=self._locks.next_seq(), live_core=core)
            self._commit(transition, {points[0].id: points[0].vector})
        return transition.records[0]

    @property
    def bm25(self) -> Bm25Encoder:
        """The BM25 encoder of the sparse vectors (hybrid search), built on first use."""
        return self._index.bm25

    def _commit(self, transition: Transition, vectors: dict[str, np.ndarray | None], contexts: dict[uuid.UUID, Context] | None = None) -> None:
        # only new text needs a new vector; a delete or restore keeps the stored one (its
        # context included; the BM25 half is encoded afresh, from the record's own words)
        reembed = {str(e.memory_id) for e in transition.events if e.event in (EventType.ADD, EventType.UPDATE)}
        points = self._index.record_points(transition.records, {pid: v for pid, v in vectors.items() if pid not in reembed}, contexts)
        points += [codec.event_point(e) for e in transition.events]
        with self._locks.store_lock:
            self.transport.upsert(points)  # one engine operation: records and their history together
        self._locks.advance_seq(e.seq for e in transition.events[-1:])

    def shown_vectors(self, shown: Sequence[tuple[str, str]], embedder: Embedder | None = None) -> np.ndarray:
        """The dense vector of each (header, words) the way the bank embeds a memory:
        unit(words + `HEADER_WEIGHT` x header), the words alone without a header. One
        ``embedder`` call (default: the bank's) for the distinct texts; a header, its clock
        time left out (`_CLOCK`), repeats for every turn of a speaker on a day, so a cached
        embedder makes it free."""
        return self._index.shown_vectors(as_shown(shown), embedder)

    def delete_all(self, scope: ScopeLike) -> int:
        """Erase a scope for good: records, history, and their bytes on disk. Returns the record count.

        The scope's turns also leave the indexes they shaped: an episodic turn of another scope
        of the same conversation (same ``run_id``) that was indexed after one of them (its
        ``context_hash`` names it) is indexed again from its own words, first, so a kill at
        any point leaves the scope whole or gone, and a retry finishes."""
        scope = as_scope(scope)
        # every stripe, not just this scope's: the purge copies whole shards (the shared one
        # too) and swaps them in, which must not happen under another scope's read-plan-write cycle
        with self._locks.writing_all():
            n = self.transport.count(codec.memories(scope))
            turn_hashes = {content_hash(r.text) for r in self._scroll_records(codec.memories(scope, tier=Tier.EPISODIC.value))}
            if turn_hashes and scope.run_id is not None:  # without a run_id a context comes from the scope itself
                self._unquote(turn_hashes, self._siblings(scope))
            with self._locks.store_lock:
                self.transport.delete(codec.scope_points(scope))  # one operation: a crash leaves all or none
                self.transport.purge()
        return n

    def _siblings(self, scope: Scope) -> list[Scope]:
        """The other scopes of ``scope``'s conversation (its ``run_id``), soft-deleted ones included."""
        keys = self.transport.scope_keys(MAX_SCOPES_LIMIT, include_deleted=True, run_id=scope.run_id)
        return [s for k in keys if (s := scope_of_key(k)) != scope]

    def _unquote(self, turn_hashes: set[str], scopes: Iterable[Scope]) -> None:
        """Index again from their own words the episodic records of ``scopes`` that were indexed
        after a text whose content hash is in ``turn_hashes``; no history event: events never held it.
        A scan of each scope's episodic tier: forgets and erases are rare, a scope's turns few."""
        quoting = [r for s in scopes for r in self._scroll_records(codec.memories(s, tier=Tier.EPISODIC.value)) if r.context_hash in turn_hashes]
        if quoting:
            points = self._index.record_points([r.model_copy(update={"context_hash": None}) for r in quoting])
            with self._locks.store_lock:
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
        offset = as_count("offset", offset, low=0)
        limit = None if limit is None else as_count("limit", limit, low=0)
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
        before_hashes = frozenset(h for r in records if (h := r.context_hash) is not None)
        own_hashes = frozenset(r.content_hash for r in records)
        found: dict[uuid.UUID, MemoryRecord] = {}
        for where in (
            codec.memories(scope, deleted=False, tier=Tier.EPISODIC.value, content_hashes=before_hashes) if before_hashes else None,
            codec.memories(scope, deleted=False, tier=Tier.EPISODIC.value, context_hashes=own_hashes) if own_hashes else None,
        ):
            if where is not None:
                turns = sorted(self._scroll_records(where), key=lambda r: r.created_at)[-ADJACENT_LIMIT:]
                found.update((r.id, r) for r in turns)
        return sorted(found.values(), key=lambda r: (r.created_at, str(r.id)))

    def scopes(self, *, limit: int = 100_000) -> builtins.list[Scope]:
        """Every scope that holds a live memory, ordered by key; ids only, never content.
        More than ``limit`` of them is an `InvalidInput` rather than a partial answer: the
        engine ranks them by size, so a cut would silently drop the smallest."""
        limit = as_count("limit", limit, low=1, high=MAX_SCOPES_LIMIT)
        keys = self.transport.scope_keys(limit + 1)
        if len(keys) > limit:
            raise InvalidInput("limit", f"more than {limit} scopes hold memories; pass a higher limit")
        return [scope_of_key(k) for k in sorted(keys)]

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
        return self.search_vector(scope, self._index.embed([query])[0], limit=limit, tier=tier, text=query if hybrid else None)

    def search_vector(self, scope: ScopeLike, vector: np.ndarray, *, limit: int = 10, tier: Tier | str | None = None, text: str | None = None) -> builtins.list[ScoredMemory]:
        """`search` with the query already embedded; ``text`` (the query's words) makes it hybrid."""
        scope = as_scope(scope)
        as_count("limit", limit, low=1, high=self.limits.max_search_limit)
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
        points = self._index.record_points(replay(events, current)) + [codec.event_point(e) for e in events]
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
        from memsdk.bank.export import prepare_import, read_export

        source, records, events = read_export(src)
        target = source if scope is None else as_scope(scope)
        records, events, ids, core = prepare_import(records, events, source, target, self.limits)
        # the target's lock suffices: ids are only kept when importing into the source scope,
        # so two imports that could collide on ids take the same lock
        with self._locks.writing(target):
            taken = self.transport.existing_ids(ids)
            if taken:
                raise ImportConflict("ids", f"{len(taken)} of this file's ids already exist in the store (import it into another scope for fresh ids); nothing was imported")
            if core and self.count(target, tier=Tier.CORE):
                raise Conflict("scope", "already has a core memory and the file holds one; delete one of them first; nothing was imported")
            points = self._index.record_points(records)
            with self._locks.store_lock:
                self.transport.upsert(points + [codec.event_point(e) for e in events])
            self._locks.advance_seq(e.seq for e in events)
        return len(records)

    def close(self) -> None:
        """Close the store; the bank is not used after (the client closes the bank it opened)."""
        self.transport.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
