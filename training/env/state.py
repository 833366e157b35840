"""The environment's state.

A Memory-R1 state is q_mem = (x, M_old) plus what judges what the manager does with it: the
bank snapshot M_old of one scope, the new input x (a turn and the facts taken from it), and
the QA items linked to x, or a gold state (the management benchmark's `Expectation`s). States are frozen values: a group of rollouts shares
one state and every rollout forks its own bank from the snapshot. Whether a snapshot is one
the runtime could have built is the bank's own check, `BankSnapshot.violations`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from memsdk.bank import BankSnapshot
from memsdk.types import Scope, Turn

from ..rewards.validity import Expectation

__all__ = ["QAItem", "MemoryState"]


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
    #: the gold state after x (the management benchmark's): when given, the reward is the share
    #: that holds (`rewards.validity`) instead of the answerer's score
    expect: tuple[Expectation, ...] = ()

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
