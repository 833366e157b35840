import math

import pytest
import torch

from memsdk_training.advantages import (
    LogoGroup,
    dr_grpo_advantages,
    expand_to_tokens,
    grouped_advantages,
    grpo_advantages,
    logo_advantages,
    nonzero_variance,
)


def test_seed_worked_example_population_std():
    advantages = grpo_advantages([0.9, 0.6, 0.2, 0.1])
    assert [round(a, 2) for a in advantages.tolist()] == [1.41, 0.47, -0.78, -1.09]
    # mean 0.45, population std sqrt(0.1025)
    expected = torch.tensor([0.45, 0.15, -0.25, -0.35]) / math.sqrt(0.1025)
    torch.testing.assert_close(advantages, expected, atol=1e-5, rtol=0)


def test_seed_em_group():
    advantages = grpo_advantages(torch.tensor([1, 1, 0, 1, 0, 1, 1, 0]))
    correct, wrong = advantages[0].item(), advantages[2].item()
    assert correct == pytest.approx(0.7746, abs=1e-4)
    assert wrong == pytest.approx(-1.2910, abs=1e-4)
    assert torch.equal(advantages > 0, torch.tensor([1, 1, 0, 1, 0, 1, 1, 0], dtype=torch.bool))


def test_grpo_batches_groups_on_the_last_dim():
    batch = grpo_advantages([[0.9, 0.6, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0]])
    torch.testing.assert_close(batch[0], grpo_advantages([0.9, 0.6, 0.2, 0.1]))
    torch.testing.assert_close(batch[1], torch.tensor([1.0, -1.0, 1.0, -1.0]), atol=1e-5, rtol=0)


def test_grpo_degenerate_groups():
    assert grpo_advantages([]).numel() == 0
    assert grpo_advantages([0.7]).tolist() == [0.0]
    assert not torch.isnan(grpo_advantages([0.5, 0.5, 0.5])).any()


def test_dr_grpo_does_not_divide_by_std():
    torch.testing.assert_close(
        dr_grpo_advantages([0.9, 0.6, 0.2, 0.1]), torch.tensor([0.45, 0.15, -0.25, -0.35]), atol=1e-6, rtol=0
    )
    assert dr_grpo_advantages([]).numel() == 0


def test_nonzero_variance_mask():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.3, 0.1 + 0.2, 0.3]], dtype=torch.float64)
    assert nonzero_variance(rewards).tolist() == [False, True, False]
    assert nonzero_variance(torch.zeros(2, 0)).tolist() == [False, False]


def test_grouped_advantages_ragged_groups():
    out = grouped_advantages([[1.0, 0.0], [0.5, 0.5, 0.5], [2.0, 0.0, 1.0]])
    s = math.sqrt(2 / 3)
    expected = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0, 1 / s, -1 / s, 0.0])
    torch.testing.assert_close(out.advantages, expected, atol=1e-5, rtol=0)
    assert out.group_index.tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    assert out.member_index.tolist() == [0, 1, 0, 1, 2, 0, 1, 2]
    assert out.keep.tolist() == [True, False, True]


def test_grouped_advantages_dr_grpo_and_empty():
    out = grouped_advantages([[1.0, 0.0, 0.0, 0.0]], scale_by_std=False)
    torch.testing.assert_close(out.advantages, torch.tensor([0.75, -0.25, -0.25, -0.25]))
    empty = grouped_advantages([])
    assert empty.advantages.numel() == 0 and empty.keep.numel() == 0


def test_logo_normalises_global_and_local_groups_separately():
    groups = [
        LogoGroup("global", session=0, rewards=[0.9, 0.6, 0.2, 0.1]),
        LogoGroup("local", session=0, rewards=[1.0, 0.0, 0.0, 0.0], anchor=2),
        LogoGroup("global", session=1, rewards=[0.4, 0.4, 0.4, 0.4]),
    ]
    out = logo_advantages(groups)
    torch.testing.assert_close(out.advantages[:4], grpo_advantages([0.9, 0.6, 0.2, 0.1]))
    # local: mean 0.25, population std sqrt(0.1875)
    s = math.sqrt(0.1875)
    torch.testing.assert_close(
        out.advantages[4:8], torch.tensor([0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s]), atol=1e-5, rtol=0
    )
    assert out.advantages[8:].tolist() == [0.0] * 4
    assert out.keep.tolist() == [True, True, False]
    assert out.group_index.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert out.groups[out.group_index[5]].anchor == 2


def test_logo_group_validation():
    with pytest.raises(ValueError):
        LogoGroup("local", session=0, rewards=[1.0])
    with pytest.raises(ValueError):
        LogoGroup("global", session=0, rewards=[1.0], anchor=3)
    with pytest.raises(ValueError):
        LogoGroup("sideways", session=0, rewards=[1.0])  # type: ignore[arg-type]


def test_expand_to_tokens_shares_the_rollout_advantage():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    out = expand_to_tokens(torch.tensor([0.5, -1.0]), mask)
    assert out.tolist() == [[0.5, 0.5, 0.0], [-1.0, -1.0, -1.0]]
