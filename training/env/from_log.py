"""Manager-training states from a client's interaction log (logged app traffic + feedback).

The Memory-R1 recipe applied to production traffic: for every logged ingest, the state is
the scope's bank *as it was just before that ingest*, the facts the extractor took from
the turn, and the answered questions whose evidence includes a memory that ingest wrote,
judged by the gold answers users attached with ``client.feedback``.

"As it was" is `MemoryBank.as_of`: the bank rebuilt from its own audit history (every
change is an event with its before/after text and version), so a state is exactly one the
runtime produced, never an approximation of it, and `BankSnapshot.violations` is empty.
The states are the release gate's manager states (`memsdk.gate.log_manager_cases`),
so a manager is trained on the same traffic its gate replays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from memsdk.bank import MemoryBank
from memsdk.gate import ManagerCase, log_manager_cases
from memsdk.interactions import InteractionLog
from memsdk.types import Scope

from .state import MemoryState, QAItem

__all__ = ["log_states", "manager_states"]


def manager_states(cases: Sequence[ManagerCase]) -> list[MemoryState]:
    """The gate's manager states as the environment's."""
    return [MemoryState(key=c.key, bank=c.before, facts=c.facts, qa=tuple(QAItem(question=q, answer=a) for q, a in c.qa), turn=c.turn) for c in cases]


def log_states(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> Iterator[MemoryState]:
    """One state per logged ingest that wrote memories later used as evidence for a judged answer."""
    yield from manager_states(log_manager_cases(log, bank, scope=scope))
