"""The environment's state, and the check that a state is one the runtime could have built.

A Memory-R1 state is q_mem = (x, M_old) plus the questions that judge what the manager does
with it: the bank snapshot M_old of one scope, the new input x (a turn and the facts taken
from it), and the QA items linked to x. States are frozen values: a group of rollouts shares
one state and every rollout forks its own bank from the snapshot.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from memsdk.bank import BankSnapshot
from memsdk.types import EventType, HistoryEvent, MemoryRecord, Scope, Turn

__all__ = ["QAItem", "MemoryState", "history_violations"]


@dataclass(frozen=True, slots=True)
class QAItem:
    """A question whose answer should be in memory once the linked input has been stored.

    ``answer`` is kept as text (LoCoMo stores some as ints); ``evidence`` are the dialogue
    ids (``D1:3``) the answer comes from; ``category`` is LoCoMo's (1 multi-hop, 2 temporal,
    3 open-domain, 4 single-hop, 5 adversarial), None for other sources.
    """

    question: str
    answer: str
    evidence: tuple[str, ...] = ()
    category: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryState:
    """q_mem = (x, M_old) and the questions linked to x.

    ``facts`` is what the manager is asked to fold into ``bank`` (for LoCoMo, the turn as the
    heuristic extractor renders it); ``turn`` is where they came from, and its ``turn_id``
    becomes the ``source_turn_ids`` of every memory the manager writes.
    """

    key: str
    bank: BankSnapshot
    facts: tuple[str, ...]
    qa: tuple[QAItem, ...]
    turn: Turn | None = None

    def __post_init__(self) -> None:
        if not self.facts:
            raise ValueError(f"state {self.key!r} has no facts for the manager")

    @property
    def scope(self) -> Scope:
        return self.bank.scope

    @property
    def source_turn_ids(self) -> tuple[str, ...]:
        return () if self.turn is None or self.turn.turn_id is None else (self.turn.turn_id,)

    def with_qa(self, qa: Sequence[QAItem]) -> MemoryState:
        """The same state judged by other questions (a group's shared QA subset)."""
        return dataclasses.replace(self, qa=tuple(qa))


def history_violations(snapshot: BankSnapshot) -> list[str]:
    """Why ``snapshot`` could not have been produced by `MemoryBank.apply` / `restore`; [] if it could.

    Replays each record's audit history: it must start with an ADD at version 1, every
    later event must raise the version by exactly one, each event's ``before`` must be the
    text the previous event left visible (None while deleted), and the last event must
    leave exactly the record's current version, text and deleted flag. A reward computed on
    a snapshot with violations would train on a state the runtime can never reach.
    """
    problems: list[str] = []
    events: dict[object, list[HistoryEvent]] = defaultdict(list)
    for e in snapshot.history():
        if e.scope != snapshot.scope:
            problems.append(f"event {e.id} belongs to {e.scope}, not {snapshot.scope}")
        events[e.memory_id].append(e)
    records = {r.id: r for r in snapshot.records(include_deleted=True)}
    for orphan in events.keys() - records.keys():
        problems.append(f"history of memory {orphan} without a record")
    for record in records.values():
        problems += _replay(record, events.get(record.id, []))
    return problems


def _replay(record: MemoryRecord, events: Sequence[HistoryEvent]) -> list[str]:
    name = f"memory {record.id}"
    if not events:
        return [f"{name} has no history"]
    if events[0].event is not EventType.ADD or events[0].version != 1 or events[0].before is not None:
        return [f"{name}: history starts with {events[0].event} v{events[0].version}, not ADD v1"]
    problems = []
    visible = events[0].after
    for prev, e in zip(events, events[1:]):
        if e.version != prev.version + 1:
            problems.append(f"{name}: version {prev.version} -> {e.version}")
        if e.event is EventType.ADD:
            problems.append(f"{name}: a second ADD at v{e.version}")
        if e.before != visible:
            problems.append(f"{name}: {e.event} v{e.version} starts from {e.before!r}, the history left {visible!r}")
        visible = e.after
    last = events[-1]
    if last.version != record.version:
        problems.append(f"{name}: record at v{record.version}, history ends at v{last.version}")
    if (visible is None) != record.deleted or (not record.deleted and visible != record.text):
        problems.append(f"{name}: record text/deleted flag differ from what its history leaves")
    return problems
