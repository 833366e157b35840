"""The frozen answer agent as a judge: a bank and its questions -> per-question scores.

    score_j = metric(answerer(q_j, top_k(M, q_j)), a*_j)        metric in {EM, F1}
    QA(M, Q) = (1 / |Q|) * sum_j score_j                          (0.0 for an empty Q)

The answerer is any `memsdk.policies.Answerer` (LLMAnswerer on any backend, or the
ExtractiveAnswerer); it only reads the bank, through the same `MemoryBank.search` the client
answers with, so the reward measures exactly the memory a user would be answered from.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from memsdk.bank import MemoryBank
from memsdk.policies import Answerer
from memsdk.types import Scope

from ..rewards.qa import exact_match, token_f1
from .state import QAItem

__all__ = ["Metric", "QAOutcome", "answer_questions", "mean_score", "sample_qa"]

Metric = Literal["em", "f1"]
_METRICS: dict[str, Callable[[object, object], float]] = {"em": exact_match, "f1": token_f1}


@dataclass(frozen=True, slots=True)
class QAOutcome:
    item: QAItem
    prediction: str
    score: float


def answer_questions(bank: MemoryBank, scope: Scope, qa: Sequence[QAItem], answerer: Answerer, *, top_k: int, metric: Metric) -> tuple[QAOutcome, ...]:
    """Ask every question over the top-k memories of ``bank`` and score the answers."""
    score = _METRICS[metric]
    out = []
    for item in qa:
        hits = bank.search(scope, item.question, limit=top_k)
        prediction = answerer.answer(item.question, hits).text
        out.append(QAOutcome(item, prediction, score(prediction, item.answer)))
    return tuple(out)


def mean_score(outcomes: Sequence[QAOutcome]) -> float:
    return sum(o.score for o in outcomes) / len(outcomes) if outcomes else 0.0


def sample_qa(qa: Sequence[QAItem], k: int | None, rng: random.Random) -> tuple[QAItem, ...]:
    """At most ``k`` items, drawn without replacement and kept in their original order.

    Drawn once per group: rollouts compared with each other must be judged by the same
    questions, or the group advantage measures question difficulty instead of the policy.
    """
    if k is None or k >= len(qa):
        return tuple(qa)
    keep = sorted(rng.sample(range(len(qa)), k))
    return tuple(qa[i] for i in keep)
