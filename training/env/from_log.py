"""Manager-training states from a client's interaction log (logged app traffic + feedback).

The Memory-R1 recipe applied to production traffic: for every logged ingest, the state is
the scope's bank *as it was just before that ingest*, the facts the extractor took from
the turn, and the answered questions whose evidence includes a memory that ingest wrote,
judged by the gold answers users attached with ``client.feedback``.

"As it was" is `MemoryBank.as_of`: the bank rebuilt from its own audit history (every
change is an event with its before/after text and version), so a state is exactly one the
runtime produced, never an approximation of it, and `BankSnapshot.violations` is empty.
"""

from __future__ import annotations

from collections.abc import Iterator

from memsdk.bank import MemoryBank
from memsdk.eval.replay import judged_gold
from memsdk.interactions import InteractionLog, Trajectory
from memsdk.types import Scope, Turn

from .state import MemoryState, QAItem

__all__ = ["log_states"]


def _linked_qa(answers: list[Trajectory], written: set[str]) -> tuple[QAItem, ...]:
    items = []
    for a in answers:
        if (gold := judged_gold(a)) and written & set(a.output.get("evidence", [])):
            items.append(QAItem(question=a.input["question"], answer=gold))
    return tuple(items)


def log_states(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> Iterator[MemoryState]:
    """One state per logged ingest that wrote memories later used as evidence for a judged answer."""
    trajectories = list(log.read(scope=scope))
    answers = [t for t in trajectories if t.kind == "answer" and t.feedback]
    for t in trajectories:
        if t.kind != "ingest" or not t.output.get("facts") or t.started_at is None:
            continue
        written = {str(op.memory_id) for op in t.ops if op.memory_id is not None and op.changed}
        written |= {t.output["episodic_id"]} if t.output.get("episodic_id") else set()  # answers cite the turn itself too
        qa = _linked_qa([a for a in answers if a.scope == t.scope and a.created_at > t.created_at], written)
        if not qa:
            continue
        yield MemoryState(
            key=f"log/{t.id}",
            bank=bank.as_of(t.scope, t.started_at, inclusive=False),  # what the manager saw, not what it then wrote
            facts=tuple(t.output["facts"]),
            qa=qa,
            turn=Turn.model_validate(t.input["turn"]),
        )
