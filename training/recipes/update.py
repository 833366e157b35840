"""One policy update from scored rollouts: PPO-clip + KL to the reference + entropy bonus.

    L = L_clip(rho, A)  +  beta_KL * KL_est(pi_theta || pi_ref)  -  beta_ent * H(pi_theta)

The pieces are the RL core's (`losses.ppo_clip_loss`, `losses.kl_estimate`,
`losses.entropy_bonus`, all reduced by `losses.aggregate`); this module only batches rows,
scores them and accumulates gradients. pi_old is the policy that sampled the rows, scored
once before the first epoch (on-policy: the weights have not moved yet), and pi_ref is the
same model with its adapter off.

Each row is one generated reply (a manager call, an answer, a Memory-R2 extractor or
manager step) with one advantage. Rows are scored ``micro_batch_size`` at a time and each
micro-batch's loss is weighted by its share of rows before backward, so the accumulated
gradient is that of the row-mean (exact for seq-mean-token-mean and step-mean with one step
per row; token-mean becomes a mean of per-micro-batch token means).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..losses import aggregate, entropy_bonus, kl_estimate, ppo_clip_loss
from .config import RecipeConfig
from .policy import Policy

__all__ = ["Row", "UpdateStats", "ppo_update"]


@dataclass(frozen=True)
class Row:
    prompt: str  # the rendered prompt generation started from
    completion: tuple[int, ...]  # the sampled token ids
    advantage: float


class UpdateStats(NamedTuple):
    loss: float
    kl: float
    entropy: float
    clip_fraction: float  # TRL's region fraction: tokens whose gradient the clip removed
    dual_clip_fraction: float
    grad_norm: float


class _Old(NamedTuple):
    logp: torch.Tensor  # [B, L]
    ref_logp: torch.Tensor  # [B, L]


def _chunks(rows: Sequence[Row], size: int) -> list[Sequence[Row]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@torch.no_grad()
def _score_old(policy: Policy, rows: Sequence[Row]) -> _Old:
    prompts, completions = [r.prompt for r in rows], [r.completion for r in rows]
    old = policy.score(prompts, completions).logp
    ref = policy.score(prompts, completions, reference=True).logp
    return _Old(old, ref)


def ppo_update(policy: Policy, optimizer: torch.optim.Optimizer, rows: Sequence[Row], config: RecipeConfig) -> UpdateStats:
    """``config.ppo_epochs`` passes over ``rows``, one optimizer step per pass."""
    rows = [r for r in rows if r.completion]  # an empty reply has no token to score
    if not rows:
        return UpdateStats(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    clip = config.clip()
    batches = _chunks(rows, config.micro_batch_size)
    olds = [_score_old(policy, b) for b in batches]
    params = policy.trainable_parameters()
    totals = dict(loss=0.0, kl=0.0, entropy=0.0, clip=0.0, dual=0.0, grad=0.0)
    for _ in range(config.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for batch, old in zip(batches, olds):
            weight = len(batch) / len(rows)
            new = policy.score([r.prompt for r in batch], [r.completion for r in batch], with_logits=True)
            advantages = torch.tensor([r.advantage for r in batch], dtype=new.logp.dtype, device=new.logp.device)  # [B]
            # one step per row: Memory-R2's step = one call = one row (ids only matter for "step" level/aggregation)
            step_ids = torch.arange(len(batch), device=new.mask.device).unsqueeze(-1).expand_as(new.mask)  # [B, L]
            pg = ppo_clip_loss(new.logp, old.logp, advantages, new.mask, clip, step_ids)
            kl = aggregate(kl_estimate(new.logp, old.ref_logp, config.kl_estimator), new.mask, config.aggregation, step_ids)
            ent = entropy_bonus(new.logits, new.mask, config.entropy_coef, config.aggregation, step_ids)  # type: ignore[arg-type]
            loss = pg.loss + config.kl_coef * kl + ent.loss
            (loss * weight).backward()
            totals["loss"] += float(loss.detach()) * weight
            totals["kl"] += float(kl.detach()) * weight
            totals["entropy"] += float(ent.entropy.detach()) * weight
            totals["clip"] += float(pg.clip_region_fraction) * weight
            totals["dual"] += float(pg.dual_clip_fraction) * weight
        norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm if config.max_grad_norm else float("inf"))
        totals["grad"] += float(norm)
        optimizer.step()
    e = config.ppo_epochs
    return UpdateStats(totals["loss"] / e, totals["kl"] / e, totals["entropy"] / e, totals["clip"] / e, totals["dual"] / e, totals["grad"] / e)
