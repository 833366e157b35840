import math

import pytest
import torch

from memsdk_training.losses.ppo import PPOClipConfig, clipped_surrogate, policy_ratio, ppo_clip_loss


def surrogate(ratios, advantage, **kwargs):
    ratio = torch.tensor(ratios, requires_grad=True)
    terms = clipped_surrogate(ratio, torch.full_like(ratio, advantage), **kwargs)
    terms.loss.sum().backward()
    return terms, ratio.grad


def test_positive_advantage_clips_above_one_plus_eps():
    terms, grad = surrogate([1.5, 0.5, 1.2, 0.8, 1.0], 1.0)
    torch.testing.assert_close(terms.loss, torch.tensor([-1.2, -0.5, -1.2, -0.8, -1.0]))
    # 1.5 is clipped (no gradient); exactly 1.2 is not: the unclipped term still acts
    torch.testing.assert_close(grad, torch.tensor([0.0, -1.0, -1.0, -1.0, -1.0]))
    assert terms.clipped_high.tolist() == [True, False, False, False, False]
    assert not terms.clipped_low.any() and not terms.dual_clipped.any()


def test_negative_advantage_clips_below_one_minus_eps_and_dual_clips_above_c():
    terms, grad = surrogate([1.5, 0.5, 0.8, 1.2, 4.0], -1.0, dual_clip_c=3.0)
    torch.testing.assert_close(terms.loss, torch.tensor([1.5, 0.8, 0.8, 1.2, 3.0]))
    torch.testing.assert_close(grad, torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0]))
    assert terms.clipped_low.tolist() == [False, True, False, False, False]
    assert terms.dual_clipped.tolist() == [False, False, False, False, True]
    assert not terms.clipped_high.any()


def test_dual_clip_boundary_and_disabled():
    terms, _ = surrogate([3.0, 4.0], -2.0, dual_clip_c=3.0)
    torch.testing.assert_close(terms.loss, torch.tensor([6.0, 6.0]))
    assert terms.dual_clipped.tolist() == [False, True]
    terms, _ = surrogate([4.0], -1.0, dual_clip_c=None)
    assert terms.loss.item() == pytest.approx(4.0)


def test_asymmetric_clip():
    terms, _ = surrogate([1.25, 1.3], 1.0, eps_low=0.2, eps_high=0.28)
    torch.testing.assert_close(terms.loss, torch.tensor([-1.25, -1.28]))
    terms, _ = surrogate([0.7, 0.75], -1.0, eps_low=0.2, eps_high=0.28)
    torch.testing.assert_close(terms.loss, torch.tensor([0.8, 0.8]))


def batch_from_log_ratios(log_ratios, mask):
    logp = torch.tensor(log_ratios, requires_grad=True)
    return logp, torch.zeros_like(logp), torch.tensor(mask)


def test_token_level_loss_and_clip_fractions():
    logp, old, mask = batch_from_log_ratios([[math.log(1.5), math.log(0.9), 0.0], [math.log(0.5), 0.0, 0.0]],
                                            [[1, 1, 1], [1, 1, 0]])
    out = ppo_clip_loss(logp, old, torch.tensor([1.0, -1.0]), mask, PPOClipConfig())
    # tokens: -1.2, -0.9, -1.0 | 0.8, 1.0
    assert out.loss.item() == pytest.approx((-1.2 - 0.9 - 1.0 + 0.8 + 1.0) / 5, abs=1e-6)
    assert out.clip_high_fraction.item() == pytest.approx(0.2, abs=1e-6)
    assert out.clip_low_fraction.item() == pytest.approx(0.2, abs=1e-6)
    assert out.clip_region_fraction.item() == pytest.approx(0.4, abs=1e-6)
    assert out.dual_clip_fraction.item() == 0.0
    assert out.per_token_loss[1, 2].item() == 0.0

    seq = ppo_clip_loss(logp, old, torch.tensor([1.0, -1.0]), mask, PPOClipConfig(aggregation="seq-mean-token-mean"))
    assert seq.loss.item() == pytest.approx(((-1.2 - 0.9 - 1.0) / 3 + (0.8 + 1.0) / 2) / 2, abs=1e-6)


def test_sequence_level_ratio_is_the_geometric_mean():
    logp, old, mask = batch_from_log_ratios([[math.log(1.5), math.log(0.9), 0.0], [math.log(0.5), 0.0, 0.0]],
                                            [[1, 1, 1], [1, 1, 0]])
    out = ppo_clip_loss(logp, old, torch.tensor([1.0, -1.0]), mask, PPOClipConfig(level="sequence"))
    rho0 = (1.5 * 0.9) ** (1 / 3)  # 1.1052, inside the clip range
    assert out.ratio[0].tolist() == pytest.approx([rho0] * 3, abs=1e-6)
    assert out.ratio[1, 0].item() == pytest.approx(math.sqrt(0.5), abs=1e-6)
    # row 1: A < 0 and rho = 0.707 < 0.8 -> clipped to 0.8
    assert out.loss.item() == pytest.approx((3 * -rho0 + 2 * 0.8) / 5, abs=1e-6)


def test_memory_r2_step_level_ratio_and_advantage():
    # one row, two steps: step 0 = tokens 0-1, step 1 = tokens 2-4
    logp, old, mask = batch_from_log_ratios([[math.log(2.0), 0.0, math.log(0.5), 0.0, 0.0]], [[1, 1, 1, 1, 1]])
    steps = torch.tensor([[0, 0, 1, 1, 1]])
    advantages = torch.tensor([[1.0, 1.0, -1.0, -2.0, 0.0]])  # step advantages 1 and -1
    config = PPOClipConfig(level="step", aggregation="step-mean")
    out = ppo_clip_loss(logp, old, advantages, mask, config, step_ids=steps)
    # step 0: rho = sqrt(2) > 1.2, A = 1 -> -1.2; step 1: rho = 0.5^(1/3) < 0.8, A = -1 -> 0.8
    assert out.ratio[0].tolist() == pytest.approx([math.sqrt(2)] * 2 + [0.5 ** (1 / 3)] * 3, abs=1e-6)
    assert out.loss.item() == pytest.approx((-1.2 + 0.8) / 2, abs=1e-6)
    assert out.clip_high_fraction.item() == pytest.approx(0.5, abs=1e-6)
    assert out.clip_low_fraction.item() == pytest.approx(0.5, abs=1e-6)
    # the same per-token losses weighted by tokens instead of steps
    by_token = ppo_clip_loss(logp, old, advantages, mask, PPOClipConfig(level="step"), step_ids=steps)
    assert by_token.loss.item() == pytest.approx((2 * -1.2 + 3 * 0.8) / 5, abs=1e-6)


def test_log_ratio_cap():
    logp, old, mask = batch_from_log_ratios([[5.0]], [[1]])
    neg = torch.tensor([-1.0])
    capped = ppo_clip_loss(logp, old, neg, mask, PPOClipConfig(dual_clip_c=None, log_ratio_cap=3.0))
    assert capped.ratio.item() == pytest.approx(math.exp(3.0), rel=1e-6)
    assert capped.loss.item() == pytest.approx(math.exp(3.0), rel=1e-6)
    uncapped = ppo_clip_loss(logp, old, neg, mask, PPOClipConfig(dual_clip_c=None, log_ratio_cap=None))
    assert uncapped.loss.item() == pytest.approx(math.exp(5.0), rel=1e-6)
    dual = ppo_clip_loss(logp, old, neg, mask, PPOClipConfig())
    assert dual.loss.item() == pytest.approx(3.0, abs=1e-6)
    assert dual.dual_clip_fraction.item() == 1.0


def test_padding_with_infinite_log_probs_is_ignored():
    logp = torch.tensor([[0.0, float("-inf")]], requires_grad=True)
    out = ppo_clip_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]), torch.tensor([[1, 0]]))
    out.loss.backward()
    assert out.loss.item() == pytest.approx(-1.0)
    assert not torch.isnan(logp.grad).any()


def test_empty_batch_is_zero_not_nan():
    logp = torch.zeros(2, 3, requires_grad=True)
    out = ppo_clip_loss(logp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3))
    assert out.loss.item() == 0.0 and out.clip_region_fraction.item() == 0.0


def test_bad_arguments():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError):
        policy_ratio(x, x, torch.zeros(1), torch.ones(1, 2), level="step")
    with pytest.raises(ValueError):
        policy_ratio(x, x, torch.zeros(1), torch.ones(1, 2), level="chunk")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PPOClipConfig(dual_clip_c=1.0)


@pytest.mark.parametrize("level", ["token", "sequence", "step"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_sgd_step_moves_sampled_log_probs_with_the_advantage(level, sign):
    torch.manual_seed(0)
    logits = torch.nn.Parameter(torch.randn(2, 4, 6))  # [B, L, V]
    tokens = torch.distributions.Categorical(logits=logits.detach()).sample()  # [B, L]
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    steps = torch.tensor([[0, 0, 1, 1], [2, 2, 2, 0]])

    def sampled_logp():
        return torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # [B, L]

    before = sampled_logp().detach()
    config = PPOClipConfig(level=level)
    loss = ppo_clip_loss(sampled_logp(), before, torch.full((2,), sign), mask, config, step_ids=steps).loss
    optimizer = torch.optim.SGD([logits], lr=0.5)
    loss.backward()
    optimizer.step()
    change = (sampled_logp().detach() - before)[mask.bool()]
    assert (change * sign > 0).all()
