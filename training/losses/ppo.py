"""Clipped policy-gradient loss: PPO, with DAPO's asymmetric clip, dual-clip, and token-,
sequence- or step-level importance ratios.

Per element (token, or the step/sequence it belongs to), with ratio rho and advantage A:

    clip_pg = max(-rho A, -clip(rho, 1 - eps_low, 1 + eps_high) A)   PPO, arXiv 1707.06347 eqn. 7
                                                                      (negated: a loss);
                                                                      eps_low != eps_high is DAPO's
                                                                      "Clip-Higher", arXiv 2503.14476
    l       = min(-c A, clip_pg)  if A < 0  else clip_pg              dual-clip, arXiv 1912.09729;
                                                                      Memory-R2 uses c = 3

Dual-clip bounds the loss of a negative-advantage token whose ratio has grown far above 1:
plain PPO's max() lets -rho A grow without limit there.

Ratio levels (log-ratio capped at +-log_ratio_cap before exp, so one stale token cannot
overflow exp; Memory-R2 caps at 3):

    token     rho_l = exp(log pi(y_l) - log pi_old(y_l)),  A_l as given
    sequence  rho_b = exp(mean_{l in b} log-ratio),  A_b = mean_{l in b} A_l
              (GSPO's length-normalised ratio, arXiv 2507.18071; the raw product
              pi(o)/pi_old(o) of Memory-R1's equation grows with length and is not offered)
    step      rho_u = exp(mean_{l in U_u} log-ratio),  A_u = mean_{l in U_u} A_l
              (Memory-R2: U_u = the tokens of one extractor or manager call)

Sequence and step values are broadcast back to their tokens, so the per-token loss is
[B, L] at every level and ``aggregate`` reduces it ("step-mean" is Memory-R2's
1/|K_step| sum_u l_u).

Clip statistics follow TRL: low = rho < 1 - eps_low with A < 0, high = rho > 1 + eps_high
with A > 0 (the cases whose gradient the clip removes; exactly at the boundary is not
clipped), region = either; dual = A < 0 and rho > c.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

from .aggregation import AggregationMode, aggregate, row_step_ids, step_means

__all__ = [
    "RatioLevel",
    "PPOClipConfig",
    "SurrogateTerms",
    "clipped_surrogate",
    "PolicyRatio",
    "policy_ratio",
    "PPOLossOutput",
    "ppo_clip_loss",
]

RatioLevel = Literal["token", "sequence", "step"]


@dataclass(frozen=True)
class PPOClipConfig:
    eps_low: float = 0.2
    eps_high: float = 0.2  # DAPO uses 0.28: more room to raise rare tokens' probability
    dual_clip_c: float | None = 3.0  # None disables dual-clip; must be > 1
    log_ratio_cap: float | None = 3.0  # None: no cap
    level: RatioLevel = "token"
    aggregation: AggregationMode = "token-mean"

    def __post_init__(self) -> None:
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError(f"dual_clip_c must be > 1, got {self.dual_clip_c}")


class SurrogateTerms(NamedTuple):
    loss: torch.Tensor  # same shape as ratio: l, the negated clipped objective
    clipped_low: torch.Tensor  # bool, rho < 1 - eps_low and A < 0
    clipped_high: torch.Tensor  # bool, rho > 1 + eps_high and A > 0
    dual_clipped: torch.Tensor  # bool, A < 0 and -c A < clip_pg (i.e. rho > c)


def clipped_surrogate(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip_c: float | None = 3.0,
) -> SurrogateTerms:
    """Elementwise l(rho, A) of the module docstring; any shape, ratio and advantages alike."""
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - eps_low, 1 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    negative = advantages < 0
    dual_clipped = torch.zeros_like(negative)
    if dual_clip_c is not None:
        bound = -dual_clip_c * advantages
        dual_clipped = negative & (bound < loss)
        loss = torch.where(dual_clipped, bound, loss)
    return SurrogateTerms(
        loss=loss,
        clipped_low=(ratio < 1 - eps_low) & negative,
        clipped_high=(ratio > 1 + eps_high) & (advantages > 0),
        dual_clipped=dual_clipped,
    )


class PolicyRatio(NamedTuple):
    ratio: torch.Tensor  # [B, L] rho at the chosen level, broadcast to tokens; 1 where masked
    advantages: torch.Tensor  # [B, L] A at the chosen level, broadcast to tokens; 0 where masked


def policy_ratio(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    level: RatioLevel = "token",
    log_ratio_cap: float | None = 3.0,
    step_ids: torch.Tensor | None = None,
) -> PolicyRatio:
    """rho and A at token, sequence or step level (module docstring).

    logp, old_logp, mask: [B, L]; advantages: [B] (one per sequence) or [B, L];
    step_ids: [B, L], required for level "step".
    """
    valid = mask.bool()  # [B, L]
    # where(), not multiplication: padded positions may hold -inf log-probs
    log_ratio = torch.where(valid, logp - old_logp.detach(), torch.zeros_like(logp))  # [B, L]
    adv = advantages.unsqueeze(-1).expand_as(logp) if advantages.dim() == 1 else advantages  # [B, L]
    adv = torch.where(valid, adv, torch.zeros_like(adv))
    if level not in ("token", "sequence", "step"):
        raise ValueError(f"unknown ratio level {level!r}")
    if level == "sequence":
        step_ids = row_step_ids(mask)  # a sequence is a step that spans its row
    if level != "token":
        if step_ids is None:
            raise ValueError("ratio level 'step' needs step_ids")
        log_ratio = step_means(log_ratio, step_ids, mask).per_token  # [B, L]
        adv = step_means(adv, step_ids, mask).per_token  # [B, L]
    if log_ratio_cap is not None:
        log_ratio = log_ratio.clamp(-log_ratio_cap, log_ratio_cap)
    return PolicyRatio(torch.exp(log_ratio), adv)


class PPOLossOutput(NamedTuple):
    loss: torch.Tensor  # [] aggregated clipped loss
    per_token_loss: torch.Tensor  # [B, L] 0 where masked
    ratio: torch.Tensor  # [B, L] detached
    clip_low_fraction: torch.Tensor  # [] detached, aggregated like the loss
    clip_high_fraction: torch.Tensor  # []
    clip_region_fraction: torch.Tensor  # []
    dual_clip_fraction: torch.Tensor  # []


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PPOClipConfig = PPOClipConfig(),
    step_ids: torch.Tensor | None = None,
) -> PPOLossOutput:
    """Aggregated l over the masked tokens, with TRL-style clip fractions.

    logp: [B, L] log pi(y_l) under the current policy (carries the gradient);
    old_logp: [B, L] under the sampling policy (treated as a constant);
    advantages: [B] or [B, L]; mask: [B, L] 1 on response tokens;
    step_ids: [B, L], needed for level "step" or aggregation "step-mean".
    """
    rho = policy_ratio(
        logp, old_logp, advantages, mask, level=config.level, log_ratio_cap=config.log_ratio_cap, step_ids=step_ids
    )
    terms = clipped_surrogate(rho.ratio, rho.advantages, config.eps_low, config.eps_high, config.dual_clip_c)
    m = mask.to(terms.loss.dtype)  # [B, L]
    per_token = terms.loss * m  # [B, L]

    def fraction(flag: torch.Tensor) -> torch.Tensor:
        return aggregate(flag.to(m.dtype), mask, config.aggregation, step_ids).detach()

    return PPOLossOutput(
        loss=aggregate(per_token, mask, config.aggregation, step_ids),
        per_token_loss=per_token,
        ratio=rho.ratio.detach(),
        clip_low_fraction=fraction(terms.clipped_low),
        clip_high_fraction=fraction(terms.clipped_high),
        clip_region_fraction=fraction(terms.clipped_low | terms.clipped_high),
        dual_clip_fraction=fraction(terms.dual_clipped),
    )
