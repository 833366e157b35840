"""Reduce a per-token loss [B, L] to a scalar, and average tokens within generation steps.

Losses compute a per-token value first and reduce it here, so the reduction is one choice
made in one place (as TRL's ``_compute_loss`` does) rather than hidden in each loss.

    token-mean           sum_{b,l} x m / sum_{b,l} m       DAPO: every token weighs the same,
                                                            long answers weigh more
    seq-mean-token-mean  mean_b ( sum_l x m / sum_l m )     GRPO (DeepSeekMath eq. 3): every
                                                            sequence weighs the same
    step-mean            mean_u ( mean_{l in U_u} x )       Memory-R2: every generation step
                                                            (one extractor or manager call)
                                                            weighs the same

Empty selections reduce to 0 (connected to the graph), never NaN.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

__all__ = ["AggregationMode", "StepMeans", "step_means", "row_step_ids", "aggregate"]

AggregationMode = Literal["token-mean", "seq-mean-token-mean", "step-mean"]


class StepMeans(NamedTuple):
    per_step: torch.Tensor  # [U] mean of the values over each step's valid tokens
    per_token: torch.Tensor  # [B, L] each valid token carries its step's mean; 0 where masked


def step_means(values: torch.Tensor, step_ids: torch.Tensor, mask: torch.Tensor) -> StepMeans:
    """x_bar_u = (1 / |U_u|) sum_{l in U_u} x_l, for U_u = valid tokens with step id u.

    ``step_ids`` [B, L] must be unique across the batch (a row may hold several steps);
    ids of masked tokens are ignored. Steps are ordered by id.
    """
    valid = mask.bool()  # [B, L]
    _, inverse = torch.unique(step_ids[valid], return_inverse=True)  # [N] step of each valid token
    num_steps = int(inverse.max()) + 1 if inverse.numel() else 0
    sums = values.new_zeros(num_steps).index_add(0, inverse, values[valid])  # [U]
    counts = values.new_zeros(num_steps).index_add(0, inverse, torch.ones_like(values[valid]))  # [U]
    per_step = sums / counts  # [U]; every step has >= 1 token by construction
    per_token = values.new_zeros(values.shape).masked_scatter(valid, per_step[inverse])  # [B, L]
    return StepMeans(per_step, per_token)


def row_step_ids(mask: torch.Tensor) -> torch.Tensor:
    """Step ids that make each row one step (sequence level): [B, L] long, id = row index."""
    return torch.arange(mask.shape[0], device=mask.device).unsqueeze(-1).expand(mask.shape)  # [B, L]


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: AggregationMode,
    step_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce per_token [B, L] under mask [B, L] to a scalar (see module docstring).

    ``step_ids`` [B, L] is required for "step-mean" and ignored otherwise.
    """
    m = mask.to(per_token.dtype)  # [B, L]
    if mode == "token-mean":
        return (per_token * m).sum() / m.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        tokens_per_row = m.sum(dim=-1)  # [B]
        row_mean = (per_token * m).sum(dim=-1) / tokens_per_row.clamp(min=1)  # [B]
        rows = (tokens_per_row > 0).to(per_token.dtype)  # [B] rows without tokens don't count
        return (row_mean * rows).sum() / rows.sum().clamp(min=1)
    if mode == "step-mean":
        if step_ids is None:
            raise ValueError("aggregation 'step-mean' needs step_ids")
        per_step = step_means(per_token, step_ids, mask).per_step  # [U]
        return per_step.mean() if per_step.numel() else (per_token * m).sum()
    raise ValueError(f"unknown aggregation mode {mode!r}")
