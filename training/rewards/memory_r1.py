"""Memory-R1 manager reward: the frozen answerer's QA score over the new bank, plus a format term.

    R^mem = QA(M_new, Q) + w_fmt * 1[o parses and the guard and the bank accept all its ops]

QA(M_new, Q) is `qa.mean_qa_score` of the answerer's EM (the paper) or token F1 per question.
w_fmt = 0 in the paper. A 135M model's replies rarely parse, so every reply of a group scores
what doing nothing scores and GRPO learns nothing; w_fmt > 0 (a DeepSeek-R1-style format
term) makes "a reply the runtime can apply" the first thing to learn.
"""

from __future__ import annotations

__all__ = ["manager_reward"]


def manager_reward(qa_score: float, valid: bool, format_weight: float = 0.0) -> float:
    """R^mem = QA(M_new, Q) + w_fmt * 1[valid]."""
    return qa_score + format_weight * valid
