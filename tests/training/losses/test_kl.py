import math

import pytest
import torch

from memsdk_training.losses.kl import kl_estimate, kl_k1, kl_k2, kl_k3


def test_hand_computed_values():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    # log r = log(0.25 / 0.5) = -log 2
    assert kl_k1(logp, ref).item() == pytest.approx(math.log(2), abs=1e-6)
    assert kl_k2(logp, ref).item() == pytest.approx(0.5 * math.log(2) ** 2, abs=1e-6)
    assert kl_k3(logp, ref).item() == pytest.approx(0.5 + math.log(2) - 1, abs=1e-6)


def test_all_estimators_vanish_when_policies_agree():
    x = torch.log(torch.tensor([[0.1, 0.7, 0.2]]))
    for name in ("k1", "k2", "k3"):
        assert kl_estimate(x, x, name).abs().max().item() == 0.0


def test_k1_and_k3_are_unbiased_over_the_exact_distribution():
    p, q = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    exact = (p * (p.log() - q.log())).sum()
    for estimator in (kl_k1, kl_k3):
        expectation = (p * estimator(p.log(), q.log())).sum()  # E_{y ~ p}[k(y)]
        assert expectation.item() == pytest.approx(exact.item(), abs=1e-12)


def test_k2_and_k3_are_non_negative_per_token():
    torch.manual_seed(0)
    logp, ref = torch.randn(4, 7), torch.randn(4, 7)
    assert (kl_k3(logp, ref) >= 0).all() and (kl_k2(logp, ref) >= 0).all()
    assert (kl_k1(logp, ref) < 0).any()


def test_gradient_of_k3_pulls_the_policy_towards_the_reference():
    logits = torch.nn.Parameter(torch.tensor([2.0, 0.0, -1.0]))
    ref_logp = torch.log(torch.tensor([1 / 3, 1 / 3, 1 / 3]))
    token = torch.tensor(0)
    before = torch.log_softmax(logits, -1)[token].item()
    kl_k3(torch.log_softmax(logits, -1)[token], ref_logp[token]).backward()
    with torch.no_grad():
        logits -= 0.1 * logits.grad
    assert torch.log_softmax(logits, -1)[token].item() < before  # over-weighted token goes down


def test_unknown_estimator():
    with pytest.raises(ValueError):
        kl_estimate(torch.zeros(1), torch.zeros(1), "k4")  # type: ignore[arg-type]
