"""Memory-R1's manager trained with PPO and a value head (the paper's PPO variant).

Same states, environment, rollouts and validation as `ManagerGRPORecipe`; only steps 2-3 of
`GRPORecipe`'s loop (``learn``) differ: a critic, not the group, is the baseline.

    V(s_l)    = w . h_l + b        h_l: the policy's last hidden state at the column whose
                                   logits predict reply token l (the same forward pass that
                                   scores the reply; the LoRA backbone is shared)   `ValueHead`
    r_l       = R on the reply's last token, 0 before it                         `losses.terminal_rewards`
    A_l, G_l  = GAE(r, V_old, gamma, lambda);  G_l = A_l + V_old(s_l)            `losses.gae`
    A'_l      = (A_l - mean A) / (std A + eps) over every valid token of the step's replies
                                                                                 `losses.whiten`
    L         = L_clip(rho_l, A'_l) + beta_KL KL_k3(pi || pi_ref) - beta_ent H   `update.policy_loss`
              + vf_coef * L_V(V, V_old, G)   (value clip value_clip)             `losses.clipped_value_loss`

pi_old, pi_ref (the adapter off) and V_old are scored once, before the first epoch; one
optimizer steps the LoRA and the value head together (``value_lr`` can give the head its
own rate). No group is dropped: replies that all scored the same still teach the critic, and
their advantages are zero only once V predicts their reward.

The value head is training-only: checkpoints keep it (trainer.pt ``modules``, so a resumed
run continues the critic and its optimizer state exactly), but the published adapter is the
LoRA alone, which is all the client's manager runs.

Run: ``python -m memsdk_training train manager-ppo --config training/configs/manager_ppo.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from ..advantages import nonzero_variance
from ..env import MemoryState
from ..losses import (
    clipped_value_loss,
    explained_variance,
    gae,
    terminal_rewards,
    whiten,
)
from .config import ManagerPPOConfig
from .grpo import GRPORecipe, Learned, S, SampledGroup
from .grpo_manager import ManagerGRPORecipe
from .metrics import DEFAULT_CURVES
from .policy import Policy
from .update import UpdateStats, policy_loss, run_epochs

__all__ = ["ManagerPPORecipe", "PPORecipe", "PPOTargets", "Reply", "ValueHead", "ppo_targets", "value_ppo_update"]


class ValueHead(torch.nn.Linear):
    """V(s) = w . h + b on the policy's hidden states: [..., H] -> [...], in float32 whatever the model's dtype."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__(hidden_size, 1)
        # an untrained critic predicts 0 everywhere, so the first advantages come from the
        # rewards alone (GAE with V = 0), not from a random projection of the hidden states
        torch.nn.init.zeros_(self.weight)
        torch.nn.init.zeros_(self.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return super().forward(hidden.float()).squeeze(-1)


@dataclass(frozen=True)
class Reply:
    prompt: str  # the rendered prompt generation started from
    completion: tuple[int, ...]  # the sampled token ids, at least one
    reward: float  # the environment's scalar reward for the whole reply


class PPOTargets(NamedTuple):
    advantages: torch.Tensor  # [N, L] A', what the policy loss sees; 0 where masked
    returns: torch.Tensor  # [N, L] G, the value targets; 0 where masked


def ppo_targets(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float) -> PPOTargets:
    """r = terminal_rewards(R, mask);  (A, G) = gae(r, V_old, mask, gamma, lambda);  A' = whiten(A, mask).

    rewards: [N] one per reply; values (V_old) and mask: [N, L]. The advantages are whitened
    over every valid token of the N replies (a step's whole batch), the returns are not.
    """
    out = gae(terminal_rewards(rewards, mask), values, mask, gamma, lam)
    return PPOTargets(whiten(out.advantages, mask), out.returns)


class _Old(NamedTuple):
    logp: torch.Tensor  # [b, L] under pi_old
    ref_logp: torch.Tensor  # [b, L] under pi_ref (adapter off)
    values: torch.Tensor  # [b, L] V_old
    mask: torch.Tensor  # [b, L]


@torch.no_grad()
def _score_old(policy: Policy, value_head: ValueHead, batch: Sequence[Reply]) -> _Old:
    prompts, completions = [r.prompt for r in batch], [r.completion for r in batch]
    old = policy.score(prompts, completions, with_hidden=True)
    assert old.hidden is not None
    return _Old(old.logp, policy.score(prompts, completions, reference=True).logp, value_head(old.hidden), old.mask)


def _pad_cat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Micro-batches [b_k, L_k] -> [N, max L_k], right-padded with 0: one batch for GAE and whitening."""
    width = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in tensors])


def value_ppo_update(
    policy: Policy, value_head: ValueHead, optimizer: torch.optim.Optimizer, replies: Sequence[Reply], config: ManagerPPOConfig
) -> tuple[UpdateStats | None, dict[str, float]]:
    """``config.ppo_epochs`` passes of L (module docstring) over ``replies``, one optimizer step per pass.

    Returns the policy's stats and the critic's: value_loss, value_clip_fraction, and, from
    the values the advantages were computed with, explained_variance (V_old against G) and
    value_mean (mean V_old over the reply tokens).
    """
    if not replies:
        return None, {}
    size = config.micro_batch_size
    starts = range(0, len(replies), size)
    batches = [replies[i : i + size] for i in starts]
    olds = [_score_old(policy, value_head, b) for b in batches]
    # GAE runs row by row, so padding micro-batches to one width changes nothing; the whitening
    # statistics must be the whole step's, not each micro-batch's
    values, mask = _pad_cat([o.values for o in olds]), _pad_cat([o.mask for o in olds])
    rewards = torch.tensor([r.reward for r in replies], dtype=values.dtype, device=values.device)  # [N]
    targets = ppo_targets(rewards, values, mask, config.gamma, config.lam)

    def micro_loss(k: int) -> tuple[torch.Tensor, dict[str, float]]:
        batch, old = batches[k], olds[k]
        rows, width = slice(starts[k], starts[k] + len(batch)), old.mask.shape[1]
        new = policy.score([r.prompt for r in batch], [r.completion for r in batch], with_logits=True, with_hidden=True)
        assert new.hidden is not None
        pl = policy_loss(new, old.logp, old.ref_logp, targets.advantages[rows, :width], config)
        vl = clipped_value_loss(value_head(new.hidden), old.values, targets.returns[rows, :width], new.mask, config.value_clip, config.aggregation)
        return pl.loss + config.vf_coef * vl.loss, {**pl.stats, "value_loss": float(vl.loss.detach()), "value_clip_fraction": float(vl.clip_fraction)}

    params = [*policy.trainable_parameters(), *value_head.parameters()]
    totals = run_epochs(optimizer, params, [len(b) / len(replies) for b in batches], micro_loss, config)
    critic = {
        "value_loss": totals["value_loss"], "value_clip_fraction": totals["value_clip_fraction"],
        "explained_variance": explained_variance(values, targets.returns, mask), "value_mean": float(values[mask.bool()].mean()),
    }  # fmt: skip
    return UpdateStats(*(totals[name] for name in UpdateStats._fields)), critic


class PPORecipe(GRPORecipe[S]):
    """`GRPORecipe`'s loop learning with PPO and a value head (module docstring) instead of group advantages.

    Listed before a GRPO recipe (``class R(PPORecipe[T], SomeGRPORecipe)``) it keeps that
    recipe's states, environment, rollouts and validation and replaces only ``learn``, the
    optimizer's parameter groups and the training-only modules.
    """

    algorithm = "ppo"
    curves = (*DEFAULT_CURVES, "value_loss", "explained_variance", "value_mean")
    config: ManagerPPOConfig
    value_head: ValueHead

    def _setup_modules(self, policy: Policy) -> dict[str, torch.nn.Module]:
        self.value_head = ValueHead(policy.model.config.hidden_size).to(policy.device)
        return {"value_head": self.value_head}

    def param_groups(self) -> list[dict[str, Any]]:
        head = {"params": list(self.value_head.parameters()), "lr": self.config.value_lr or self.config.lr}
        return [*super().param_groups(), head]

    def learn(self, groups: Sequence[SampledGroup]) -> Learned:
        """Steps 2 + 3: per-token GAE on the value head's estimates, then PPO epochs; every reply is a row."""
        replies = [Reply(g.prompt, s.token_ids, s.reward) for g in groups for s in g.samples if s.token_ids]
        stats, critic = value_ppo_update(self.policy, self.value_head, self.optimizer, replies, self.config)
        # nothing is dropped; logged so PPO and GRPO runs compare on how often groups were uniform
        uniform = sum(not bool(nonzero_variance(g.rewards)) for g in groups) / len(groups)
        return Learned(stats, len(replies), uniform, critic)


class ManagerPPORecipe(PPORecipe[MemoryState], ManagerGRPORecipe):
    """Memory-R1's manager with PPO: `ManagerGRPORecipe`'s data and environment, `PPORecipe`'s learning."""

    config: ManagerPPOConfig

    def __init__(self, config: ManagerPPOConfig) -> None:
        super().__init__(config)
