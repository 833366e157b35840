"""Value head pieces for PPO with a critic (Memory-R1's PPO variant).

GAE (Schulman et al., arXiv 1506.02438, §3):

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t)          V = 0 after the last valid token
    A_t     = sum_{l>=0} (gamma lambda)^l delta_{t+l}  = delta_t + gamma lambda A_{t+1}
    G_t     = A_t + V(s_t)                             the value target ("returns")

Clipped value loss (PPO2 in openai/baselines; the PPO paper has no equation for it):

    V_clip = V_old + clip(V - V_old, -eps, eps)
    L_V    = 1/2 max((V - G)^2, (V_clip - G)^2)

The clip keeps one update from moving the critic far from the values the advantages were
computed with, mirroring the policy clip.

Batch whitening of the advantages (openai/baselines PPO2, TRL's ``masked_whiten``) and the
critic's explained variance, both over the valid tokens of the batch:

    A'  = (A - mean A) / (std A + eps)
    EV  = 1 - Var[G - V] / Var[G]          1: V predicts the returns; <= 0: no better than a constant
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .aggregation import AggregationMode, aggregate

__all__ = ["terminal_rewards", "GAEOutput", "gae", "whiten", "explained_variance", "ValueLossOutput", "clipped_value_loss"]


def terminal_rewards(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put each sequence's scalar reward on its last valid token: [B], [B, L] -> [B, L].

    An exact-match reward exists only for the finished output, so r_t = 0 elsewhere and GAE
    carries it back through the values. Rows without valid tokens get no reward.
    """
    m = mask.to(torch.long)  # [B, L]
    positions = torch.arange(m.shape[-1], device=m.device).expand_as(m)  # [B, L]
    last = (positions * m).argmax(dim=-1, keepdim=True)  # [B, 1] index of the last valid token
    rewards = torch.zeros(m.shape, dtype=scores.dtype, device=scores.device)  # [B, L]
    has_tokens = m.sum(dim=-1, keepdim=True) > 0  # [B, 1]
    return rewards.scatter(-1, last, (scores.unsqueeze(-1) * has_tokens))


class GAEOutput(NamedTuple):
    advantages: torch.Tensor  # [B, L] A_t, 0 where masked
    returns: torch.Tensor  # [B, L] G_t = A_t + V_t, the value target; 0 where masked


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 0.95
) -> GAEOutput:
    """A_t and G_t of the module docstring. rewards, values, mask: [B, L].

    A masked position ends the episode for the valid token before it (right padding), so V
    after the last valid token is 0. The outputs are targets, never differentiated, hence
    the detach.
    """
    rewards, values = rewards.detach(), values.detach()
    m = mask.to(values.dtype)  # [B, L]
    advantages = torch.zeros_like(values)  # [B, L]
    next_value = values.new_zeros(values.shape[0])  # [B]
    next_advantage = values.new_zeros(values.shape[0])  # [B]
    for t in reversed(range(values.shape[-1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # [B]
        advantages[:, t] = (delta + gamma * lam * next_advantage) * m[:, t]
        next_value = values[:, t] * m[:, t]
        next_advantage = advantages[:, t]
    return GAEOutput(advantages, (advantages + values) * m)


def whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """A' of the module docstring: [B, L] -> [B, L], 0 where masked.

    Mean and population std are taken over every valid token of the batch, so an advantage
    is large relative to the whole batch (not its own row). The shift makes them sum to 0
    over the batch, so a critic that lags behind the rewards cannot push every token up.
    """
    valid = values[mask.bool()]  # [N]
    if valid.numel() == 0:
        return torch.zeros_like(values)
    return (values - valid.mean()) / (valid.std(correction=0) + eps) * mask.to(values.dtype)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """EV of the module docstring over the valid tokens of values, returns, mask [B, L]; NaN when Var[G] = 0."""
    valid = mask.bool()
    v, g = values.detach()[valid], returns.detach()[valid]  # [N]
    var_g = g.var(correction=0) if g.numel() else g.new_zeros(())
    return float("nan") if float(var_g) == 0 else float(1 - (g - v).var(correction=0) / var_g)


class ValueLossOutput(NamedTuple):
    loss: torch.Tensor  # [] aggregated L_V
    clip_fraction: torch.Tensor  # [] detached: share of tokens where the clipped term won


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float | None = 0.2,
    mode: AggregationMode = "token-mean",
) -> ValueLossOutput:
    """L_V of the module docstring; ``clip_eps=None`` gives the plain 1/2 (V - G)^2.

    values [B, L] carries the gradient; old_values and returns [B, L] are constants.
    """
    old_values, returns = old_values.detach(), returns.detach()
    unclipped = (values - returns) ** 2  # [B, L]
    if clip_eps is None:
        per_token, clipped_won = 0.5 * unclipped, torch.zeros_like(mask, dtype=torch.bool)
    else:
        v_clip = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        clipped = (v_clip - returns) ** 2  # [B, L]
        per_token, clipped_won = 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped
    loss = aggregate(per_token * mask.to(per_token.dtype), mask, mode)
    return ValueLossOutput(loss, aggregate(clipped_won.to(per_token.dtype), mask, mode).detach())
