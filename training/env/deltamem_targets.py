"""DeltaMem's training data: (session, bank before, bank after) triples, and their builders.

A triple (`TargetTriple`) is one DeltaMem state: turns to ingest (a turn, a chunk or a whole
session), the facts the extractor took from each of them, the scope's bank just before
(`BankSnapshot`, the state S_t a rollout forks) and the bank the ingest should have left
(S_target, which the soft state F1 scores a rollout's S_pred against). Two builders:

    teacher_triples      a stronger teacher's run through the client: whatever policies the
                         client serves (any OpenAI-compatible model by `LLMSpec`; the
                         heuristics; a scripted backend in a test) ingest the turns, and the
                         bank before and after each state is snapshotted
    correction_triples   hand corrections in the interaction log: an app's ``update`` /
                         ``delete`` / ``restore`` after a logged ingest is a correction of the
                         policy's state, so the target is the bank as that ingest left it with
                         the corrections replayed on a fork

`locomo_triples` runs the heuristic (or an LLM) teacher over LoCoMo conversations, so the
recipe runs out of the box. Nothing here is a bank invariant: the replay uses the bank's own
`as_of`, `fork`, `apply` and `restore`.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsdk.bank import BankSnapshot, MemoryBank
from memsdk.embedding import Embedder
from memsdk.errors import Conflict, InvalidInput, MemoryNotFound
from memsdk.interactions import InteractionLog, Trajectory
from memsdk.store.memory import InMemoryTransport
from memsdk.types import API_ACTOR, EventType, HistoryEvent, Op, Scope, Tier, Turn

from .episodes import chunks
from .locomo import PathLike, conversation, locomo_sessions

__all__ = ["TargetTriple", "teacher_triples", "correction_triples", "locomo_triples", "heuristic_teacher", "llm_teacher", "CORRECTIONS"]

#: the app's edits that correct a policy's state (an app's ``add`` is new information, not a correction)
CORRECTIONS = (EventType.UPDATE, EventType.DELETE, EventType.RESTORE)


@dataclass(frozen=True)
class TargetTriple:
    """(session, bank before, bank after): one DeltaMem training state.

    ``facts[i]`` is what the extractor took from ``turns[i]``: a rollout's manager decides the
    same facts the target's run decided (the extractor is not what DeltaMem trains).
    """

    key: str
    turns: tuple[Turn, ...]
    facts: tuple[tuple[str, ...], ...]
    before: BankSnapshot
    after: BankSnapshot
    source: str = "teacher"  # "teacher" or "correction"

    def __post_init__(self) -> None:
        if len(self.facts) != len(self.turns):
            raise ValueError(f"triple {self.key!r}: {len(self.facts)} fact lists for {len(self.turns)} turns")
        if self.before.scope != self.after.scope:
            raise ValueError(f"triple {self.key!r}: before and after are different scopes")

    @property
    def scope(self) -> Scope:
        return self.before.scope

    @property
    def asks_the_manager(self) -> bool:
        """Whether a rollout calls the model at all: some fact to decide, and a semantic memory
        to decide it against (on an empty bank the manager ADDs without a call)."""
        return any(self.facts) and any(r.tier == Tier.SEMANTIC for r in self.before.records())


# -- 1. a teacher's run through the client ---------------------------------------------------------
def teacher_triples(client: Any, sessions: Iterable[tuple[str, Sequence[Turn]]], scope: Scope) -> Iterator[TargetTriple]:
    """One triple per ``(key, turns)``: the client's bank before, the teacher's ingest of the
    turns (``client.ingest``, turn by turn, as an app ingests), the bank after.

    ``client`` is a `MemoryClient` whose policies are the teacher; its bank is the teacher's
    bank, growing state by state (lazily: taking three triples ingests three states' turns).
    """
    for key, turns in sessions:
        turns = tuple(turns)
        before = client.bank.snapshot(scope)
        results = client.ingest(list(turns), scope=scope, progress=False)
        yield TargetTriple(key, turns, tuple(tuple(r.facts) for r in results), before, client.bank.snapshot(scope), "teacher")


def heuristic_teacher(embedder: Embedder, data_dir: str | Path | None = None, **settings: Any) -> Any:
    """A `MemoryClient` on an in-memory bank with the heuristic policies: the teacher the
    LoCoMo recipe uses out of the box (no model; its manager ADDs, merges near-duplicates by
    UPDATE and skips duplicates). ``settings`` are more client settings."""
    return _client(embedder, data_dir, policies="heuristic", **settings)


def llm_teacher(embedder: Embedder, base_url: str, model: str | None = None, *, prompt: str = "deltamem/v1", data_dir: str | Path | None = None, **settings: Any) -> Any:
    """A `MemoryClient` whose manager is any OpenAI-compatible model (``base_url``), served
    with ``prompt`` (DeltaMem's by default), and whose extractor is the heuristic one, so the
    facts a rollout decides are the teacher's."""
    from memsdk import LLMSpec

    manager = LLMSpec(base_url=base_url, model=model, prompt=prompt, fallback=False)
    return _client(embedder, data_dir, policies={"extractor": "heuristic", "manager": manager, "answerer": "heuristic"}, **settings)


def _client(embedder: Embedder, data_dir: str | Path | None, **settings: Any) -> Any:
    from memsdk import MemoryClient

    folder = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="deltamem-teacher-"))
    bank = MemoryBank(InMemoryTransport(embedder.dim), embedder)
    return MemoryClient(data_dir=folder, bank=bank, log_interactions=False, **settings)


def locomo_triples(sample_id: str, client: Any, *, turns_per_state: int = 1, path: PathLike = None) -> Iterator[TargetTriple]:
    """The teacher's triples over one LoCoMo conversation, in order: chunks of
    ``turns_per_state`` turns inside each session (a large value: whole sessions, DeltaMem's
    own unit). Only triples that ask the manager something are yielded (`asks_the_manager`);
    the teacher still ingests every turn, so later banks hold the whole conversation so far."""
    scope = Scope(user_id="locomo", run_id=sample_id)

    def sessions() -> Iterator[tuple[str, Sequence[Turn]]]:
        for key, turns in locomo_sessions(conversation(sample_id, path)):
            for chunk in chunks(turns, turns_per_state):
                yield f"{key}/{chunk[0].turn_id}", chunk

    return (t for t in teacher_triples(client, sessions(), scope) if t.asks_the_manager)


# -- 2. hand corrections in the interaction log ------------------------------------------------------
def _ingest_events(t: Trajectory, history: Sequence[HistoryEvent]) -> list[HistoryEvent]:
    """The history events a logged ingest wrote: its ops (memory id and version) and its episodic turn."""
    written = {(op.memory_id, op.version) for op in t.ops if op.memory_id is not None and op.version is not None}
    if t.output.get("episodic_id"):
        written |= {(uuid.UUID(t.output["episodic_id"]), 1)}
    return [e for e in history if (e.memory_id, e.version) in written]


def _corrections(history: Sequence[HistoryEvent], after_seq: int) -> list[HistoryEvent]:
    """The app's corrections of semantic memories after ``after_seq``, up to the next write by
    anything but the app (the next ingest, a read, a forget): those are the next state's."""
    found = []
    for e in history:
        if e.seq <= after_seq:
            continue
        if e.actor.role != API_ACTOR.role:
            break
        if e.event in CORRECTIONS and e.tier == Tier.SEMANTIC:
            found.append(e)
    return found


def _replayed(bank: MemoryBank, start: BankSnapshot, corrections: Sequence[HistoryEvent]) -> tuple[BankSnapshot, int]:
    """``start`` with the corrections applied on a fork, by the app's own calls; how many applied.
    A correction of a memory the ingest's state does not hold (the app added it later) is skipped."""
    fork, scope, applied = MemoryBank.from_snapshot(start, bank.embedder, limits=bank.limits), start.scope, 0
    for e in corrections:
        try:
            if e.event is EventType.RESTORE:
                fork.restore(scope, e.memory_id, actor=API_ACTOR)
            elif e.event is EventType.DELETE:
                fork.apply(scope, [Op.delete(e.memory_id)], actor=API_ACTOR)
            elif e.after is not None:
                fork.apply(scope, [Op.update(e.memory_id, e.after)], actor=API_ACTOR)
            else:
                continue
        except (MemoryNotFound, InvalidInput, Conflict):
            continue
        applied += 1
    return fork.snapshot(scope), applied


def correction_triples(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> Iterator[TargetTriple]:
    """One triple per logged ingest that the app corrected afterwards.

    before  the bank just before the ingest's first event (`MemoryBank.as_of`)
    after   the bank as the ingest left it, with the app's ``update`` / ``delete`` /
            ``restore`` of semantic memories that followed it replayed in order, up to the
            next write by anything but the app (`_corrections`)

    Ingests without facts (nothing for the manager) or without a correction are skipped: an
    uncorrected ingest says nothing about what the policy should have done.
    """
    histories: dict[Scope, list[HistoryEvent]] = {}
    for t in log.read(scope=scope, kind="ingest"):
        facts = tuple(t.output.get("facts") or ())
        if not facts:
            continue
        history = histories.get(t.scope)
        if history is None:
            history = histories[t.scope] = bank.history(t.scope)
        mine = _ingest_events(t, history)
        if not mine:
            continue
        corrections = _corrections(history, mine[-1].seq)
        if not corrections:
            continue
        after, applied = _replayed(bank, bank.as_of(t.scope, mine[-1].id, inclusive=True), corrections)
        if not applied:
            continue
        before = bank.as_of(t.scope, mine[0].id, inclusive=False)
        yield TargetTriple(f"log/{t.id}", (Turn.model_validate(t.input["turn"]),), (facts,), before, after, "correction")
