"""Learners: scored groups -> one update of the policy (steps 2-3 of `recipes.loop`).

A learner is a plain object the loop holds; which one runs is the config's business
(`learner_for`), not a subclass's:

GroupLearner (GRPO, Dr.GRPO; every recipe but PPO)
    A_i = (R_i - mean R) / (std R + eta) within each group (``scale_by_std=False``: no std,
    Dr.GRPO); groups whose rewards are all equal carry no signal and are dropped (DAPO,
    ``drop_zero_variance``); every call of a member is a row with the member's advantage;
    then `update.ppo_update`: PPO-clip + KL to the adapter-free model + entropy.

ValueLearner (Memory-R1's PPO variant, ``learner: value``: a ``ManagerPPOConfig``): a critic,
not the group, is the baseline.

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

Data-parallel (`training.distributed`): a learner sees the whole step's groups on every
rank, so advantages are taken over whole groups (GRPO) and the whitening statistics over
the whole step's tokens (PPO: each rank scores V_old for its share of the replies, and the
values are gathered before GAE); each rank then backpropagates its share of the rows.

The value head is training-only: checkpoints keep it (trainer.pt ``modules``, so a resumed
run continues the critic and its optimizer state exactly), but the published adapter is the
LoRA alone, which is all the client's manager runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch

from ..advantages import GroupedAdvantages, grouped_advantages, nonzero_variance
from ..distributed import World
from ..losses import clipped_value_loss, explained_variance, gae, terminal_rewards, whiten
from .config import RecipeConfig
from .lora_model import LoRAModel
from .samples import SampledGroup
from .update import Row, UpdateStats, policy_loss, ppo_update, run_epochs, score_old

__all__ = [
    "Learned", "Learner", "GroupLearner", "ValueLearner", "learner_for",
    "PPOTargets", "Reply", "ValueHead", "ppo_targets", "value_ppo_update",
]  # fmt: skip


class Learned(NamedTuple):
    """What one step's learning reports to the metrics row."""

    stats: UpdateStats | None  # None: no update ran this step
    rows: int  # rows the update saw
    zero_variance_fraction: float  # groups whose rewards were all equal
    extra: dict[str, float]  # the learner's own metrics (PPO: value_loss, explained_variance)


class Learner(Protocol):
    name: str  # "grpo" / "ppo": the progress bar's label
    curves: tuple[str, ...]  # its own metrics, drawn beside the loop's
    modules: dict[str, torch.nn.Module]  # training-only modules: checkpointed, never published

    def param_groups(self) -> list[dict[str, Any]]:
        """What the optimizer steps beside the LoRA (with their own settings)."""
        ...

    def learn(self, policy: LoRAModel, optimizer: torch.optim.Optimizer, groups: Sequence[SampledGroup]) -> Learned:
        """Advantages from the scored groups, then the update; the weights move in place."""
        ...


class GroupLearner:
    """GRPO / Dr.GRPO with DAPO's zero-variance filter (module docstring)."""

    name = "grpo"
    curves: tuple[str, ...] = ()

    def __init__(self, config: RecipeConfig, world: World = World()) -> None:
        self.config, self.world = config, world
        self.modules: dict[str, torch.nn.Module] = {}

    def param_groups(self) -> list[dict[str, Any]]:
        return []

    def advantages(self, groups: Sequence[SampledGroup]) -> GroupedAdvantages:
        """A_i = (R_i - mean R) / (std R + eta) per group (Dr.GRPO without the std)."""
        return grouped_advantages([g.rewards for g in groups], scale_by_std=self.config.scale_by_std)

    def rows(self, groups: Sequence[SampledGroup], adv: GroupedAdvantages) -> list[Row]:
        """Every call of every kept member, with the member's advantage (an empty reply has no token to score)."""
        out = []
        for a, g, m in zip(adv.advantages.tolist(), adv.group_index.tolist(), adv.member_index.tolist()):
            if self.config.drop_zero_variance and not adv.keep[g]:
                continue
            out += [Row(c.prompt, c.token_ids, a) for c in groups[g].samples[m].completions if c.token_ids]
        return out

    def learn(self, policy: LoRAModel, optimizer: torch.optim.Optimizer, groups: Sequence[SampledGroup]) -> Learned:
        """When every group was uniform there is nothing to learn from and the weights stay as they are."""
        adv = self.advantages(groups)
        rows = self.rows(groups, adv)
        stats = ppo_update(policy, optimizer, rows, self.config, self.world)
        return Learned(stats, len(rows), float((~adv.keep).double().mean()), {})


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
def _score_old_values(policy: LoRAModel, value_head: ValueHead, batch: Sequence[Reply]) -> _Old:
    """`update.score_old` with both passes whatever the config, then V_old from the head (under
    no_grad, like the passes). pi_old's pass is always needed: V_old reads its hidden states and
    GAE its mask; pi_ref's runs even with kl_coef 0, so the KL is logged though it weighs 0."""
    scored = score_old(policy, [r.prompt for r in batch], [r.completion for r in batch], old=True, reference=True, with_hidden=True)
    old = scored.pi_old
    assert old is not None and old.hidden is not None and scored.ref_logp is not None
    return _Old(old.logp, scored.ref_logp, value_head(old.hidden), old.mask)


def _pad_cat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Micro-batches [b_k, L_k] -> [N, max L_k], right-padded with 0: one batch for GAE and whitening."""
    width = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in tensors])


def _gather_rows(world: World, local: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Every rank's micro-batches [b_k, L_k], in rank order, as one [N, max L] batch on ``device``
    (a rank with no rows contributes none)."""
    mine = _pad_cat(local).cpu() if local else None
    return _pad_cat([t for t in world.gather(mine) if t is not None]).to(device)


def value_ppo_update(
    policy: LoRAModel, value_head: ValueHead, optimizer: torch.optim.Optimizer, replies: Sequence[Reply], config: RecipeConfig,
    world: World = World(),
) -> tuple[UpdateStats | None, dict[str, float]]:  # fmt: skip
    """``config.ppo_epochs`` passes of L (module docstring) over ``replies``, one optimizer step per pass.

    Returns the policy's stats and the critic's: value_loss, value_clip_fraction, and, from
    the values the advantages were computed with, explained_variance (V_old against G) and
    value_mean (mean V_old over the reply tokens). ``replies`` are the whole step's; this
    rank scores and backpropagates its share. ``config`` has the value head's settings
    (`RecipeConfig.value_settings`).
    """
    if not replies:
        return None, {}
    value = config.value_settings()
    size, part = config.micro_batch_size, world.part(len(replies))
    starts = range(part.start, part.stop, size)  # indices into the whole step's replies
    batches = [replies[i : min(i + size, part.stop)] for i in starts]
    olds = [_score_old_values(policy, value_head, b) for b in batches]
    # GAE runs row by row, so padding micro-batches to one width changes nothing; the whitening
    # statistics must be the whole step's, not each micro-batch's (nor each rank's)
    values = _gather_rows(world, [o.values for o in olds], policy.device)
    mask = _gather_rows(world, [o.mask for o in olds], policy.device)
    rewards = torch.tensor([r.reward for r in replies], dtype=values.dtype, device=values.device)  # [N]
    targets = ppo_targets(rewards, values, mask, value.gamma, value.lam)

    def micro_loss(k: int) -> tuple[torch.Tensor, dict[str, float]]:
        batch, old = batches[k], olds[k]
        rows, width = slice(starts[k], starts[k] + len(batch)), old.mask.shape[1]
        new = policy.score([r.prompt for r in batch], [r.completion for r in batch], with_logits=True, with_hidden=True)
        assert new.hidden is not None
        pl = policy_loss(new, old.logp, old.ref_logp, targets.advantages[rows, :width], config)
        vl = clipped_value_loss(value_head(new.hidden), old.values, targets.returns[rows, :width], new.mask, value.value_clip, config.aggregation)
        return pl.loss + value.vf_coef * vl.loss, {**pl.stats, "value_loss": float(vl.loss.detach()), "value_clip_fraction": float(vl.clip_fraction)}

    params = [*policy.trainable_parameters(), *value_head.parameters()]
    totals = run_epochs(optimizer, params, [len(b) / len(replies) for b in batches], micro_loss, config, world)
    critic = {
        "value_loss": totals["value_loss"], "value_clip_fraction": totals["value_clip_fraction"],
        "explained_variance": explained_variance(values, targets.returns, mask), "value_mean": float(values[mask.bool()].mean()),
    }  # fmt: skip
    return UpdateStats(*(totals[name] for name in UpdateStats._fields)), critic


class ValueLearner:
    """PPO with a value head (module docstring): every reply with a token is a row."""

    name = "ppo"
    curves: tuple[str, ...] = ("value_loss", "explained_variance", "value_mean")

    def __init__(self, config: RecipeConfig, policy: LoRAModel, world: World = World()) -> None:
        self.config, self.world = config, world
        self.settings = config.value_settings()  # a config without them fails here, not at the first step
        self.value_head = ValueHead(policy.model.config.hidden_size).to(policy.device)
        self.modules: dict[str, torch.nn.Module] = {"value_head": self.value_head}

    def param_groups(self) -> list[dict[str, Any]]:
        return [{"params": list(self.value_head.parameters()), "lr": self.settings.value_lr or self.config.lr}]

    def learn(self, policy: LoRAModel, optimizer: torch.optim.Optimizer, groups: Sequence[SampledGroup]) -> Learned:
        replies = [Reply(c.prompt, c.token_ids, s.reward) for g in groups for s in g.samples for c in s.completions if c.token_ids]
        stats, critic = value_ppo_update(policy, self.value_head, optimizer, replies, self.config, self.world)
        # nothing is dropped; logged so PPO and GRPO runs compare on how often groups were uniform
        uniform = sum(not bool(nonzero_variance(g.rewards)) for g in groups) / len(groups)
        return Learned(stats, len(replies), uniform, critic)


def learner_for(config: RecipeConfig, policy: LoRAModel, world: World = World()) -> Learner:
    """The config's ``learner``: PPO with a value head ('value'), or group-normalised GRPO ('group')."""
    if config.learner == "value":
        return ValueLearner(config, policy, world)
    return GroupLearner(config, world)
