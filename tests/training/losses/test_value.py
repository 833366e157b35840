import math

import pytest
import torch

from memsdk_training.losses.value import clipped_value_loss, explained_variance, gae, terminal_rewards, whiten

REWARDS = torch.tensor([[0.0, 0.0, 1.0]])
VALUES = torch.tensor([[0.5, 0.6, 0.7]])
FULL = torch.ones(1, 3)


def test_gae_with_gamma_lambda_one_is_monte_carlo_minus_value():
    out = gae(REWARDS, VALUES, FULL, gamma=1.0, lam=1.0)
    torch.testing.assert_close(out.advantages, torch.tensor([[0.5, 0.4, 0.3]]))
    torch.testing.assert_close(out.returns, torch.tensor([[1.0, 1.0, 1.0]]))


def test_gae_hand_computed():
    # deltas: 0.9*0.6-0.5 = 0.04, 0.9*0.7-0.6 = 0.03, 1-0.7 = 0.3; gamma*lambda = 0.45
    out = gae(REWARDS, VALUES, FULL, gamma=0.9, lam=0.5)
    a2 = 0.3
    a1 = 0.03 + 0.45 * a2
    a0 = 0.04 + 0.45 * a1
    torch.testing.assert_close(out.advantages, torch.tensor([[a0, a1, a2]]))
    torch.testing.assert_close(out.returns, torch.tensor([[a0 + 0.5, a1 + 0.6, a2 + 0.7]]))


def test_gae_treats_padding_as_episode_end():
    rewards = torch.tensor([[0.0, 1.0, 5.0]])
    values = torch.tensor([[0.5, 0.6, 9.0]], requires_grad=True)
    out = gae(rewards, values, torch.tensor([[1, 1, 0]]), gamma=1.0, lam=1.0)
    torch.testing.assert_close(out.advantages, torch.tensor([[0.5, 0.4, 0.0]]))
    assert out.returns[0, 2].item() == 0.0
    assert not out.advantages.requires_grad


def test_terminal_rewards_land_on_the_last_valid_token():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    out = terminal_rewards(torch.tensor([2.0, 3.0, 4.0]), mask)
    assert out.tolist() == [[0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]


def value_loss(value, old, target, clip_eps=0.2):
    v = torch.tensor([[value]], requires_grad=True)
    out = clipped_value_loss(v, torch.tensor([[old]]), torch.tensor([[target]]), torch.ones(1, 1), clip_eps)
    out.loss.backward()
    return out, v.grad.item()


def test_clipped_term_wins_when_the_update_overshoots_away_from_the_target():
    # V_clip = 0.5 + 0.2 = 0.7; (0.7 - 2)^2 = 1.69 > (1 - 2)^2 = 1
    out, grad = value_loss(1.0, 0.5, 2.0)
    assert out.loss.item() == pytest.approx(0.845, abs=1e-6)
    assert out.clip_fraction.item() == 1.0
    assert grad == 0.0


def test_unclipped_term_wins_when_it_is_larger():
    # (1 - 0)^2 = 1 > (0.7 - 0)^2 = 0.49; gradient (V - G) = 1
    out, grad = value_loss(1.0, 0.5, 0.0)
    assert out.loss.item() == pytest.approx(0.5, abs=1e-6)
    assert out.clip_fraction.item() == 0.0
    assert grad == pytest.approx(1.0)


def test_unclipped_value_loss():
    out, grad = value_loss(1.0, 0.5, 2.0, clip_eps=None)
    assert out.loss.item() == pytest.approx(0.5, abs=1e-6)
    assert grad == pytest.approx(-1.0)


def test_value_loss_empty_mask():
    out = clipped_value_loss(torch.ones(1, 2), torch.ones(1, 2), torch.zeros(1, 2), torch.zeros(1, 2))
    assert out.loss.item() == 0.0 and out.clip_fraction.item() == 0.0


def test_whiten_uses_the_statistics_of_the_valid_tokens_only():
    # valid: 1, 2, 3 -> mean 2, population std sqrt(2/3); the padded 100 must not count
    values = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    out = whiten(values, torch.tensor([[1, 1], [1, 0]]), eps=0.0)
    s = (2 / 3) ** 0.5
    torch.testing.assert_close(out, torch.tensor([[-1 / s, 0.0], [1 / s, 0.0]]))


def test_whiten_empty_mask_is_zero():
    assert whiten(torch.ones(2, 2), torch.zeros(2, 2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_explained_variance_hand_computed():
    returns = torch.tensor([[1.0, 0.0, 1.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full((1, 4), 0.5), returns, mask) == pytest.approx(0.0)  # a constant explains nothing
    # G - V = [0.5, -0.5, 0.5]: Var = 2/9; Var[G] = 2/9 -> 0; V = G/2: Var[G/2] = 1/18 -> 1 - (1/18)/(2/9) = 0.75
    assert explained_variance(returns / 2, returns, mask) == pytest.approx(0.75)
    assert math.isnan(explained_variance(returns, torch.ones(1, 4), mask))  # undefined when Var[G] = 0
