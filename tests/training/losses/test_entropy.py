import math

import pytest
import torch

from memsdk_training.losses.entropy import entropy_bonus, token_entropy


def test_uniform_and_peaked_entropy():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]])  # [1, 2, 4]
    h = token_entropy(logits)
    assert h[0, 0].item() == pytest.approx(math.log(4), abs=1e-6)
    assert h[0, 1].item() == pytest.approx(0.0, abs=1e-6)


def test_banned_tokens_with_minus_inf_logits_are_not_nan():
    h = token_entropy(torch.tensor([[[0.0, 0.0, float("-inf")]]]))
    assert h.item() == pytest.approx(math.log(2), abs=1e-6)


def test_entropy_bonus_is_negative_coef_times_masked_mean():
    logits = torch.zeros(1, 3, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 0]])
    out = entropy_bonus(logits, mask, coef=0.1)
    assert out.entropy.item() == pytest.approx(math.log(4), abs=1e-6)
    assert out.loss.item() == pytest.approx(-0.1 * math.log(4), abs=1e-6)
    assert out.per_token[0, 2].item() == 0.0


def test_minimising_the_bonus_raises_entropy():
    logits = torch.nn.Parameter(torch.tensor([[[2.0, 0.0, -1.0]]]))
    mask = torch.ones(1, 1)
    before = token_entropy(logits).item()
    entropy_bonus(logits, mask, coef=1.0).loss.backward()
    with torch.no_grad():
        logits -= 0.1 * logits.grad
    assert token_entropy(logits).item() > before


def test_empty_mask():
    out = entropy_bonus(torch.zeros(1, 2, 3), torch.zeros(1, 2))
    assert out.loss.item() == 0.0
