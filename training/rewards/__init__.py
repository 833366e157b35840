"""Rewards: pure functions from answers and memory states to floats.

qa          exact match, token F1, BLEU-1 (LoCoMo normalisation); QA(M, Q), their mean over questions
memory_r1   manager reward QA + w_fmt * 1[valid]
memory_r2   session reward QA-F1 - lambda_comp * Comp
deltamem    soft state F1 and the format / retrieval / state total
mem_alpha   format validity, compression, content validity and their sum
memagent    equivalence and multi-answer coverage
"""

from .deltamem import DeltaMemConfig, StateDeltas, StateF1, deltamem_reward, retrieval_score, soft_state_f1
from .mem_alpha import MemAlphaConfig, compression_reward, content_validity, format_validity, mem_alpha_reward
from .memagent import coverage_reward, equivalence_reward
from .memory_r1 import manager_reward
from .memory_r2 import SessionRewardConfig, compression_penalty, mean_qa_f1, session_reward
from .qa import QA_METRICS, Metric, bleu1, exact_match, mean_qa_score, normalize_answer, token_f1

__all__ = [
    "DeltaMemConfig",
    "MemAlphaConfig",
    "Metric",
    "QA_METRICS",
    "SessionRewardConfig",
    "StateDeltas",
    "StateF1",
    "bleu1",
    "compression_penalty",
    "compression_reward",
    "content_validity",
    "coverage_reward",
    "deltamem_reward",
    "equivalence_reward",
    "exact_match",
    "format_validity",
    "manager_reward",
    "mean_qa_f1",
    "mean_qa_score",
    "mem_alpha_reward",
    "normalize_answer",
    "retrieval_score",
    "session_reward",
    "soft_state_f1",
    "token_f1",
]
