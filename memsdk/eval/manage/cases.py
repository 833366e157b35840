"""The benchmark's questions as answerer states: what the answer path shows after a scenario.

Each scenario's turns go through a client without an LLM (`memsdk.gate.answer_cases`,
the manager a trained one such as the pair manager, so superseded facts reach the answerer
marked with when they ended), then each current- and previous-state question becomes an
`AnswerCase` with the memories shown for it and its gold. The evidence is the turns that
state the gold's value, so a warm start's teacher cites them. The answerer learns and is
gated on these beside LoCoMo's: "where does she live now?" over a bank that knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from memsdk.embedding.base import Embedder
from memsdk.eval.manage.scenarios.demo import scenarios
from memsdk.eval.manage.scenarios.models import Question, Scenario, ScenarioSplit
from memsdk.gate import AnswerCase, answer_cases
from memsdk.serving.policy_set import rules_manager

__all__ = ["manage_answer_cases"]


@dataclass(frozen=True, slots=True)
class _Asked:
    """A question in the shape `answer_cases` reads (LoCoMo's field names)."""

    question: str
    answer: str
    evidence: tuple[str, ...]


def _asked(sc: Scenario, q: Question) -> _Asked:
    stating = (f for f in sc.facts if f.owner == q.owner and f.slot == q.slot and q.gold in (f.answer, f.value))
    return _Asked(q.text, q.gold, next((f.stated_in for f in stating), ()))


def manage_answer_cases(split: ScenarioSplit, embedder: Embedder, *, k: int, n: int | None = None, seed: int = 0, manager: str = "pairs") -> list[AnswerCase]:
    """The questions of ``n`` scenarios of ``split`` (its default size when None) with the
    ``k`` memories the answer path shows for each; keys ``<scenario id>/q<i>``. ``manager``
    names a manager without an LLM (`rules_manager`)."""
    banked = rules_manager(manager, embedder)
    return [c for sc in scenarios(split, n, seed=seed) for c in answer_cases(sc.id, [t.turn() for t in sc.turns], [_asked(sc, q) for q in sc.questions], embedder, k=k, manager=banked)]
