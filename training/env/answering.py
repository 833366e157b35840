"""Answering with the frozen answer agent: a bank and its questions -> per-question outcomes.

The answerer is any `memsdk.policies.Answerer` (LLMAnswerer on any backend, or the
ExtractiveAnswerer); it only reads the bank, through the same `MemoryBank.search` the client
answers with, so the reward measures exactly the memory a user would be answered from.

The scores themselves are `rewards.qa`'s: score_j = metric(a_hat_j, a*_j) per question and
QA(M, Q), their mean. This module asks the questions and draws which ones a group is asked.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from memsdk.bank import MemoryBank
from memsdk.policies import Answerer
from memsdk.types import Scope

from ..rewards.qa import QA_METRICS, Metric, mean_qa_score
from .state import QAItem

__all__ = ["Metric", "QAOutcome", "answer_questions", "mean_score", "sample_qa"]


@dataclass(frozen=True, slots=True)
class QAOutcome:
    item: QAItem
    prediction: str
    score: float  # score_j


def answer_questions(bank: MemoryBank, scope: Scope, qa: Sequence[QAItem], answerer: Answerer, *, top_k: int, metric: Metric) -> tuple[QAOutcome, ...]:
    """Ask every question over the top-k memories of ``bank`` and score the answers."""
    score = QA_METRICS[metric]
    out = []
    for item in qa:
        hits = bank.search(scope, item.question, limit=top_k)
        prediction = answerer.answer(item.question, hits).text
        out.append(QAOutcome(item, prediction, score(prediction, item.answer)))
    return tuple(out)


def mean_score(outcomes: Sequence[QAOutcome]) -> float:
    """QA(M, Q) over the answered questions (`rewards.qa.mean_qa_score`)."""
    return mean_qa_score([o.score for o in outcomes])


def sample_qa(qa: Sequence[QAItem], k: int | None, rng: random.Random) -> tuple[QAItem, ...]:
    """At most ``k`` items, drawn without replacement and kept in their original order.

    Drawn once per group: rollouts compared with each other must be judged by the same
    questions, or the group advantage measures question difficulty instead of the policy.
    """
    if k is None or k >= len(qa):
        return tuple(qa)
    keep = sorted(rng.sample(range(len(qa)), k))
    return tuple(qa[i] for i in keep)
