"""Memory-R2 session reward: answer quality minus a penalty for an oversized memory.

    QA(M, Q_t)  = (1 / |Q_t|) * sum_{(q, a*) in Q_t} F1(a_hat, a*)
    Comp(M, t)  = max(0, Tok(M) - alpha * sum_{s<=t} Tok(S_s)) / sum_{s<=t} Tok(S_s)
    R(M, Q_t, t) = QA(M, Q_t) - lambda_comp * Comp(M, t)

Memory may use up to a fraction alpha of the tokens seen so far for free; beyond that every
extra token costs lambda_comp / (tokens seen). alpha = 0.7, lambda_comp = 0.3 were the best
setting in the Memory-R2 paper (seeds/000, "Memory-R2").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .qa import mean_qa_score, token_f1

__all__ = ["SessionRewardConfig", "mean_qa_f1", "compression_penalty", "session_reward"]


@dataclass(frozen=True)
class SessionRewardConfig:
    alpha: float = 0.7  # fraction of the cumulative session tokens memory may use unpenalised
    lambda_comp: float = 0.3  # weight of the compression penalty


def mean_qa_f1(predictions: Sequence[object], golds: Sequence[object]) -> float:
    """QA(M, Q_t) = `qa.mean_qa_score` of token F1 over the session's questions.

    An empty Q_t scores 0.0, so every rollout of its group differs only by its compression term.
    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold answers")
    return mean_qa_score([token_f1(p, g) for p, g in zip(predictions, golds)])


def compression_penalty(memory_tokens: int, session_tokens: Sequence[int], alpha: float = 0.7) -> float:
    """Comp(M, t) = max(0, Tok(M) - alpha * sum Tok(S_1..t)) / sum Tok(S_1..t).

    With no session tokens seen an empty memory costs 0.0; a non-empty one cannot have come
    from the sessions, so it is a caller error rather than an infinite penalty.
    """
    seen = sum(session_tokens)
    if seen == 0:
        if memory_tokens:
            raise ValueError(f"memory holds {memory_tokens} tokens but no session tokens were seen")
        return 0.0
    return max(0.0, memory_tokens - alpha * seen) / seen


def session_reward(
    qa_score: float,
    memory_tokens: int,
    session_tokens: Sequence[int],
    config: SessionRewardConfig = SessionRewardConfig(),
) -> float:
    """R(M, Q_t, t) = QA(M, Q_t) - lambda_comp * Comp(M, t).

    ``qa_score`` is QA(M, Q_t) (see ``mean_qa_f1``); ``session_tokens`` are Tok(S_1..t), the
    token counts of every session up to and including t.
    """
    return qa_score - config.lambda_comp * compression_penalty(memory_tokens, session_tokens, config.alpha)
