"""Group-relative advantages: GRPO, Dr.GRPO, zero-variance filtering and LoGo-GRPO.

    GRPO     A_i = (R_i - mean(R)) / (std(R) + eta)      DeepSeekMath, arXiv 2402.03300 §4.1.2
    Dr.GRPO  A_i =  R_i - mean(R)                        arXiv 2503.20783 (MemAgent uses it)

std is the POPULATION std (divide by G, not G - 1): it is what the seeds' worked examples use
([0.9, 0.6, 0.2, 0.1] -> [1.41, 0.47, -0.78, -1.09]) and it does not blow up for G = 2.

A group whose rewards are all equal has A = 0 everywhere and only adds noise to the batch
mean; DAPO's dynamic sampling (arXiv 2503.14476) drops such groups, which
``nonzero_variance`` reports.

LoGo-GRPO (Memory-R2) normalises two kinds of groups separately and concatenates them:
global groups (session t's reward across the n full rollouts) and local groups (the m
re-rolls of session t from one anchor rollout's memory state). ``LogoGroup`` says which is
which; ``logo_advantages`` returns the flat advantages with indices back to the groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

__all__ = [
    "grpo_advantages",
    "dr_grpo_advantages",
    "nonzero_variance",
    "GroupedAdvantages",
    "grouped_advantages",
    "LogoGroup",
    "LogoAdvantages",
    "logo_advantages",
    "expand_to_tokens",
]

Rewards = torch.Tensor | Sequence[float]


def _as_float_tensor(values: Rewards) -> torch.Tensor:
    tensor = torch.as_tensor(values)
    return tensor if tensor.is_floating_point() else tensor.to(torch.get_default_dtype())


def grpo_advantages(rewards: Rewards, eta: float = 1e-6) -> torch.Tensor:
    """A_i = (R_i - mean(R)) / (std_pop(R) + eta) over the last dim.

    rewards: [..., G] (one group, or a batch of equal-sized groups). A group of one has
    A = 0; an empty group gives an empty tensor.
    """
    r = _as_float_tensor(rewards)  # [..., G]
    if r.shape[-1] == 0:
        return r.clone()
    centred = r - r.mean(dim=-1, keepdim=True)
    return centred / (r.std(dim=-1, correction=0, keepdim=True) + eta)


def dr_grpo_advantages(rewards: Rewards) -> torch.Tensor:
    """A_i = R_i - mean(R) over the last dim: Dr.GRPO drops the std, whose division
    up-weights near-uniform groups (questions that are too easy or too hard)."""
    r = _as_float_tensor(rewards)  # [..., G]
    return r - r.mean(dim=-1, keepdim=True) if r.shape[-1] else r.clone()


def nonzero_variance(rewards: Rewards, atol: float = 1e-9) -> torch.Tensor:
    """Keep-mask for DAPO dynamic sampling: True where max(R) - min(R) > atol.

    rewards: [N, G] -> [N] bool, or [G] -> [] bool. ``atol`` absorbs float noise such as
    0.1 + 0.2 != 0.3, which GRPO's division would otherwise blow up into +-1 advantages.
    """
    r = _as_float_tensor(rewards)  # [..., G]
    if r.shape[-1] == 0:
        return torch.zeros(r.shape[:-1], dtype=torch.bool)
    return (r.amax(dim=-1) - r.amin(dim=-1)) > atol


class GroupedAdvantages(NamedTuple):
    advantages: torch.Tensor  # [sum G_k] groups concatenated in input order; 0 in dropped groups
    group_index: torch.Tensor  # [sum G_k] long: which input group each entry belongs to
    member_index: torch.Tensor  # [sum G_k] long: position of the entry within its group
    keep: torch.Tensor  # [num_groups] bool: False for zero-variance groups


def grouped_advantages(
    groups: Sequence[Rewards], *, scale_by_std: bool = True, eta: float = 1e-6, atol: float = 1e-9
) -> GroupedAdvantages:
    """Normalise ragged groups independently (GRPO, or Dr.GRPO when ``scale_by_std=False``)
    and concatenate them. Zero-variance groups are flagged in ``keep`` and their entries are
    set to exactly 0, so a caller that ignores ``keep`` still gets no spurious signal."""
    parts, group_ids, members, keep = [], [], [], []
    for k, group in enumerate(groups):
        r = _as_float_tensor(group).reshape(-1)  # [G_k]
        keep_k = bool(nonzero_variance(r, atol))
        adv = grpo_advantages(r, eta) if scale_by_std else dr_grpo_advantages(r)
        parts.append(adv if keep_k else torch.zeros_like(r))
        group_ids.append(torch.full((len(r),), k, dtype=torch.long))
        members.append(torch.arange(len(r)))
        keep.append(keep_k)
    if not parts:
        empty = torch.zeros(0, dtype=torch.long)
        return GroupedAdvantages(torch.zeros(0), empty, empty, torch.zeros(0, dtype=torch.bool))
    return GroupedAdvantages(
        torch.cat(parts), torch.cat(group_ids), torch.cat(members), torch.tensor(keep, dtype=torch.bool)
    )


@dataclass(frozen=True)
class LogoGroup:
    """One LoGo-GRPO comparison group.

    global: ``rewards[i]`` = r^G_{t,i}, session t's reward for full rollout i (i = 0..n-1).
    local:  ``rewards[j]`` = r^L_{t,j}, session t's reward for re-roll j (j = 0..m-1) from
            the memory state rollout ``anchor`` had before session t.
    """

    branch: Literal["global", "local"]
    session: int
    rewards: Sequence[float]
    anchor: int | None = None

    def __post_init__(self) -> None:
        if self.branch not in ("global", "local"):
            raise ValueError(f"branch must be 'global' or 'local', not {self.branch!r}")
        if (self.branch == "local") != (self.anchor is not None):
            raise ValueError("a local group needs its anchor rollout; a global group has none")


class LogoAdvantages(NamedTuple):
    advantages: torch.Tensor  # [sum G_k] all groups, concatenated in input order
    group_index: torch.Tensor  # [sum G_k] long, index into the input groups
    member_index: torch.Tensor  # [sum G_k] long: rollout i (global) or re-roll j (local)
    keep: torch.Tensor  # [num_groups] bool, False for zero-variance groups
    groups: tuple[LogoGroup, ...]  # the input, so group_index resolves to branch/session/anchor


def logo_advantages(groups: Sequence[LogoGroup], eta: float = 1e-6, atol: float = 1e-9) -> LogoAdvantages:
    """A^G_{t,i} = (r^G_{t,i} - mu^G_t) / (sigma^G_t + eps) within each global group and
    A^L_{t,j} = (r^L_{t,j} - mu^L_t) / (sigma^L_t + eps) within each local group; never across.

    Local re-rolls share their anchor's memory state, so their reward differences come from
    session t's own extraction and management rather than from earlier sessions.
    """
    grouped = grouped_advantages([g.rewards for g in groups], eta=eta, atol=atol)
    return LogoAdvantages(*grouped, groups=tuple(groups))


def expand_to_tokens(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Give every response token its sequence's advantage: [B] -> [B, L], 0 where masked.

    MemAgent's Multi-Conv DAPO: each memory-update conversation of rollout i is a row whose
    tokens all take A_i.
    """
    return advantages.unsqueeze(-1) * mask.to(advantages.dtype)  # [B, L]
