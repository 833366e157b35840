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

Under data parallelism (`training.distributed`) the rows are the whole step's, on every
rank; each rank scores its share, the weights stay shares of the whole step's rows, and
`run_epochs` sums the accumulated gradients across ranks before clipping, so the step is
the one-process step.

`score_old` (the no-grad passes), `policy_loss` (one micro-batch's L) and `run_epochs` (the
accumulate / clip / step loop) are public so that an update with more terms (PPO with a
value head, `recipes.learners.ValueLearner`) adds its terms instead of repeating the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..distributed import World
from ..losses import aggregate, entropy_bonus, kl_estimate, ppo_clip_loss
from .config import RecipeConfig
from .lora_model import LoRAModel, Scored

__all__ = ["OldScores", "PolicyLoss", "Row", "UpdateStats", "policy_loss", "ppo_update", "run_epochs", "score_old", "update_metrics"]


@dataclass(frozen=True)
class Row:
    prompt: str  # the rendered prompt generation started from
    completion: tuple[int, ...]  # the sampled token ids
    advantage: float


class UpdateStats(NamedTuple):
    loss: float
    kl: float | None  # None: kl_coef is 0, so no reference pass ran and nothing was measured
    entropy: float
    clip_fraction: float  # TRL's region fraction: tokens whose gradient the clip removed
    dual_clip_fraction: float
    grad_norm: float


def update_metrics(stats: UpdateStats | None) -> dict[str, float | bool]:
    """A metrics row's update fields: what the step's update measured, or ``updated: False``
    alone when none ran (every group had equal rewards, or no reply had a token). A skipped
    step must not log a KL of 0.0 it never measured."""
    return {"updated": False} if stats is None else {"updated": True, **{k: v for k, v in stats._asdict().items() if v is not None}}


class OldScores(NamedTuple):
    pi_old: Scored | None  # pi_old's pass (log-probs, mask, hidden states when asked); None: not run
    ref_logp: torch.Tensor | None  # [B, L] under pi_ref; None: not run

    @property
    def logp(self) -> torch.Tensor | None:
        """[B, L] under pi_old; None: not scored, the loss takes pi_old from its own forward pass."""
        return None if self.pi_old is None else self.pi_old.logp


def _chunks(rows: Sequence[Row], size: int) -> list[Sequence[Row]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@torch.no_grad()
def score_old(
    policy: LoRAModel, prompts: Sequence[str], completions: Sequence[Sequence[int]], *, old: bool, reference: bool, with_hidden: bool = False
) -> OldScores:
    """The no-grad passes before the first epoch: pi_old (``old``; ``with_hidden``: its hidden
    states too, for a value head) and pi_ref, the adapter off (``reference``), in that order.
    Which to run is the caller's: `ppo_update` runs only those whose result can matter, a
    value learner always both."""
    return OldScores(
        policy.score(prompts, completions, with_hidden=with_hidden) if old else None,
        policy.score(prompts, completions, reference=True).logp if reference else None,
    )


class PolicyLoss(NamedTuple):
    loss: torch.Tensor  # [] L of the module docstring, carries the gradient
    stats: dict[str, float]  # kl, entropy, clip_fraction, dual_clip_fraction: detached, for the log


def policy_loss(new: Scored, old_logp: torch.Tensor | None, ref_logp: torch.Tensor | None, advantages: torch.Tensor, config: RecipeConfig) -> PolicyLoss:
    """L = L_clip(rho, A) + beta_KL * KL_est + L_ent for one micro-batch scored ``with_logits``.

    old_logp, ref_logp: [B, L]; advantages: [B] (one per row, GRPO) or [B, L] (per token, GAE).
    ``old_logp`` None: pi_old is this very forward pass, detached (one epoch: rho = 1, the
    gradient is the on-policy one); ``ref_logp`` None: no KL term (kl_coef 0), none logged.
    """
    # one step per row: Memory-R2's step = one call = one row (ids only matter for "step" level/aggregation)
    step_ids = torch.arange(new.mask.shape[0], device=new.mask.device).unsqueeze(-1).expand_as(new.mask)  # [B, L]
    pg = ppo_clip_loss(new.logp, new.logp.detach() if old_logp is None else old_logp, advantages, new.mask, config.clip(), step_ids)
    assert new.logits is not None  # the caller scores with_logits=True
    ent = entropy_bonus(new.logits, new.mask, config.entropy_coef, config.aggregation, step_ids)
    stats = {"entropy": float(ent.entropy), "clip_fraction": float(pg.clip_region_fraction), "dual_clip_fraction": float(pg.dual_clip_fraction)}
    loss = pg.loss + ent.loss
    if ref_logp is not None:
        kl = aggregate(kl_estimate(new.logp, ref_logp, config.kl_estimator), new.mask, config.aggregation, step_ids)
        stats["kl"] = float(kl.detach())
        loss = loss + config.kl_coef * kl
    return PolicyLoss(loss, stats)


def run_epochs(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.nn.Parameter], weights: Sequence[float],
    micro_loss: Callable[[int], tuple[torch.Tensor, dict[str, float]]], config: RecipeConfig, world: World = World(),
) -> dict[str, float]:  # fmt: skip
    """``config.ppo_epochs`` passes, one optimizer step each: grad = sum_k w_k grad L_k over micro-batches k.

    ``micro_loss(k)`` returns L_k and its stats; with w_k = rows_k / rows the accumulated
    gradient is that of the row-mean. Returns the per-pass means of "loss", of every stat
    (each weighted by w_k) and of "grad_norm" (before clipping, over ``params``).
    Data-parallel: ``weights`` are this rank's micro-batches' shares of the whole step's rows
    (possibly none); gradients and stats are summed over ranks before clipping.
    """
    totals: dict[str, float] = {}
    grad_norm = 0.0
    for _ in range(config.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for k, weight in enumerate(weights):
            loss, stats = micro_loss(k)
            (loss * weight).backward()
            for name, value in {"loss": float(loss.detach()), **stats}.items():
                totals[name] = totals.get(name, 0.0) + value * weight
        world.sum_grads(params)
        norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm if config.max_grad_norm else float("inf"))
        grad_norm += float(norm)  # of the summed gradient: the same on every rank
        optimizer.step()
    totals = {**world.sum(totals), "grad_norm": grad_norm}  # each rank weighed only its own rows
    return {name: value / config.ppo_epochs for name, value in totals.items()}


def ppo_update(
    policy: LoRAModel, optimizer: torch.optim.Optimizer, rows: Sequence[Row], config: RecipeConfig, world: World = World()
) -> UpdateStats | None:
    """``config.ppo_epochs`` passes over ``rows`` (the whole step's; this rank scores its
    share), one optimizer step per pass; None (and the weights untouched) when there is no
    row with a token to learn from."""
    rows = [r for r in rows if r.completion]  # an empty reply has no token to score
    if not rows:
        return None
    batches = _chunks(world.share(rows), config.micro_batch_size)
    # only the passes whose result can matter (as TRL): with one epoch the weights have not moved
    # when the loss is taken, so pi_old is the policy's own detached log-probs; with kl_coef 0
    # the KL term is 0 whatever pi_ref says
    run_old, run_ref = config.ppo_epochs > 1, config.kl_coef > 0
    olds = [score_old(policy, [r.prompt for r in b], [r.completion for r in b], old=run_old, reference=run_ref) for b in batches]

    def micro_loss(k: int) -> PolicyLoss:
        batch, old = batches[k], olds[k]
        new = policy.score([r.prompt for r in batch], [r.completion for r in batch], with_logits=True)
        advantages = torch.tensor([r.advantage for r in batch], dtype=new.logp.dtype, device=new.logp.device)  # [B]
        return policy_loss(new, old.logp, old.ref_logp, advantages, config)

    totals = run_epochs(optimizer, policy.trainable_parameters(), [len(b) / len(rows) for b in batches], micro_loss, config, world)
    return UpdateStats._make(totals.get(name) for name in UpdateStats._fields)  # "kl" is absent when kl_coef is 0
