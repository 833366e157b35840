"""A state reward for supersession: does the bank after the manager's ops hold what is true now?

The management benchmark knows, for each turn, which earlier turns it replaces, which it
restates and which it leaves alone. A manager state carries that as expectations over the
records sourced from those turns (`Expectation`), and the reward is the share that hold:

    S(M_new) = (1 / |E|) sum_{e in E} 1[e holds in M_new]
    holds(current: T)  = some record sourced from T is current
    holds(retired: T)  = some record sourced from T is kept (not deleted), none is current
    holds(absent: T)   = no record sourced from T is current (a restatement adds nothing)
    R = S(M_new) + w_fmt * 1[the reply parses and every op is accepted]      (`manager_reward`)

"retired" asks for DeltaMem's history-keeping update rather than a deletion: the old fact
stays findable as history. The checks read records by source turn, not by words, so a
correction that names the wrong value ("gluten-free, not vegetarian") does not count as
keeping it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memsdk.types import MemoryRecord

__all__ = ["Expectation", "holds", "validity_score"]


@dataclass(frozen=True, slots=True)
class Expectation:
    """What must be true, after the manager's ops, of the records sourced from ``turn_ids``."""

    turn_ids: tuple[str, ...]
    status: Literal["current", "retired", "absent"]


def holds(expectation: Expectation, records: Sequence[MemoryRecord]) -> bool:
    """Whether ``expectation`` holds over ``records`` (one scope's, deleted ones included)."""
    sourced = [r for r in records if set(r.source_turn_ids) & set(expectation.turn_ids)]
    if expectation.status == "current":
        return any(r.current for r in sourced)
    if expectation.status == "retired":
        return any(not r.deleted for r in sourced) and not any(r.current for r in sourced)
    return not any(r.current for r in sourced)


def validity_score(expectations: Sequence[Expectation], records: Sequence[MemoryRecord]) -> float:
    """S(M_new): the share of ``expectations`` that hold (1.0 when there are none)."""
    if not expectations:
        return 1.0
    return sum(holds(e, records) for e in expectations) / len(expectations)
