"""Entropy bonus: L_ent = -beta_ent * H_bar, H_l = -sum_v p_l(v) log p_l(v).

Subtracting the mean token entropy from the loss keeps the policy from collapsing onto one
output too early (Memory-R2: beta_ent = 0.001). Entropy is computed from log_softmax in
float32, and vocabulary entries with p = 0 contribute 0 (never 0 * -inf = NaN).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .aggregation import AggregationMode, aggregate

__all__ = ["token_entropy", "EntropyBonus", "entropy_bonus"]


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """H_l = -sum_v softmax(z_l)_v log softmax(z_l)_v.  [B, L, V] -> [B, L]"""
    logp = torch.log_softmax(logits.float(), dim=-1)  # [B, L, V] float32: bf16 sums drift
    # a -inf logit (a banned token) has p = 0 and log p = -inf; its term is 0, not NaN
    plogp = torch.where(torch.isfinite(logp), logp.exp() * logp, torch.zeros_like(logp))
    return -plogp.sum(dim=-1)  # [B, L]


class EntropyBonus(NamedTuple):
    loss: torch.Tensor  # [] -beta_ent * H_bar, add to the total loss
    entropy: torch.Tensor  # [] H_bar, detached, for logging
    per_token: torch.Tensor  # [B, L] H_l, 0 where masked


def entropy_bonus(
    logits: torch.Tensor,
    mask: torch.Tensor,
    coef: float = 0.001,
    mode: AggregationMode = "token-mean",
    step_ids: torch.Tensor | None = None,
) -> EntropyBonus:
    """-coef * aggregate(H, mask, mode). logits [B, L, V], mask [B, L]."""
    per_token = token_entropy(logits) * mask.to(torch.float32)  # [B, L]
    mean_entropy = aggregate(per_token, mask, mode, step_ids)
    return EntropyBonus(-coef * mean_entropy, mean_entropy.detach(), per_token)
