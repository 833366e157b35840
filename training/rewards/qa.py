"""Answer-quality rewards: exact match, token F1 and BLEU-1 per answer, and their mean over questions.

    score_j  = metric(a_hat_j, a*_j)              metric in {EM, F1}        (QA_METRICS)
    QA(M, Q) = (1 / |Q|) * sum_j score_j          0.0 for an empty Q        (mean_qa_score)

QA(M, Q) is the answer term of every recipe that trains memory: Memory-R1's manager reward
(`memory_r1`), Memory-R2's session reward (`memory_r2`, metric F1) and Mem-alpha's R1. The
environment asks the questions with its frozen answerer; the scoring is all here.

EM, F1 and BLEU-1 live in `memsdk.scoring`, which the evaluation harness reports with,
so that a reward and the number reported on LoCoMo are one implementation; this module keeps
the names the trainer imports.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from memsdk.scoring import answer_tokens, bleu1, exact_match, normalize_answer, token_f1

__all__ = ["Metric", "QA_METRICS", "normalize_answer", "answer_tokens", "exact_match", "token_f1", "bleu1", "mean_qa_score"]

Metric = Literal["em", "f1"]
QA_METRICS: Mapping[str, Callable[[object, object], float]] = {"em": exact_match, "f1": token_f1}


def mean_qa_score(scores: Sequence[float]) -> float:
    """QA(M, Q) = (1 / |Q|) * sum_j score_j; 0.0 when no question was asked.

    A state or session without linked questions has no answer signal; 0.0 keeps the reward
    defined, so the other terms of a recipe's reward still rank its rollouts.
    """
    return sum(scores) / len(scores) if scores else 0.0
