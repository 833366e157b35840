"""Mem-alpha write-step reward (four parts, seeds/000 "Mem-α").

    R2_t = (1/K_t) sum_k s(a_t^k)      s = 1 if call k of step t executed, else 0
    R3   = 1 - L_M / L_C               memory length over total chunk length
    R4_t = (1/K_t) sum_k v(a_t^k)      v = 1 if a judge finds call k semantically valid
    R_t  = R1 + R2_t + w3 * R3 + w4 * R4_t

R1 (final QA accuracy) and R3 are shared by every step of a rollout; R2_t and R4_t are per
step. w3 = 0.05 and w4 = 0.1 are the values in Mem-alpha's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["MemAlphaConfig", "format_validity", "compression_reward", "content_validity", "mem_alpha_reward"]

Call = TypeVar("Call")


@dataclass(frozen=True)
class MemAlphaConfig:
    w3: float = 0.05  # compression
    w4: float = 0.1  # content validity


def format_validity(executed: Sequence[bool]) -> float:
    """R2_t = mean of s over the step's calls.

    A step with no calls scores 0.0, not 1.0: an output that does not parse yields no calls,
    and scoring it as "nothing failed" would reward garbage.
    """
    return sum(map(bool, executed)) / len(executed) if executed else 0.0


def compression_reward(memory_length: int, context_length: int) -> float:
    """R3 = 1 - L_M / L_C, unclipped (a memory longer than the context scores below 0).

    No context (L_C = 0) -> 0.0: there was nothing to compress.
    """
    return 1.0 - memory_length / context_length if context_length else 0.0


def content_validity(calls: Sequence[Call], judge: Callable[[Call], bool]) -> float:
    """R4_t = mean of v = judge(call) over the step's calls; no calls -> 0.0 (as R2_t).

    ``judge`` is the hook for Mem-alpha's LLM judge; tests and cheap runs pass a rule.
    """
    return sum(bool(judge(c)) for c in calls) / len(calls) if calls else 0.0


def mem_alpha_reward(
    qa_accuracy: float,
    format_score: float,
    compression_score: float,
    content_score: float,
    config: MemAlphaConfig = MemAlphaConfig(),
) -> float:
    """R_t = R1 + R2_t + w3 * R3 + w4 * R4_t."""
    return qa_accuracy + format_score + config.w3 * compression_score + config.w4 * content_score
