"""Per-token estimators of KL(pi || pi_ref) from samples y ~ pi (Schulman, "Approximating
KL Divergence", 2020, http://joschu.net/blog/kl-approx.html).

With log r = log pi_ref(y) - log pi(y):

    k1 = -log r                    unbiased, high variance, can be negative per token
    k2 = (log r)^2 / 2             biased, low variance, always >= 0
    k3 = (r - 1) - log r           unbiased, low variance, always >= 0 (GRPO, DeepSeekMath
         = exp(ref - logp) - (ref - logp) - 1                                       eq. 4;
                                   Memory-R2's "low-var" KL)

Inputs and outputs are [B, L]; reduce with ``aggregate``. No clamping: a huge ref - logp
makes k3 overflow, and that should be visible rather than silently clipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

__all__ = ["KLEstimator", "kl_k1", "kl_k2", "kl_k3", "kl_estimate"]

KLEstimator = Literal["k1", "k2", "k3"]


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log pi(y) - log pi_ref(y).  [B, L] -> [B, L]"""
    return logp - ref_logp


def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (log pi_ref(y) - log pi(y))^2 / 2.  [B, L] -> [B, L]"""
    return 0.5 * (ref_logp - logp) ** 2


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(ref - logp) - (ref - logp) - 1.  [B, L] -> [B, L]"""
    log_r = ref_logp - logp
    return torch.exp(log_r) - log_r - 1


_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": kl_k1,
    "k2": kl_k2,
    "k3": kl_k3,
}


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: KLEstimator = "k3") -> torch.Tensor:
    """The named estimator, per token: [B, L] -> [B, L]."""
    if estimator not in _ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose from {sorted(_ESTIMATORS)}")
    return _ESTIMATORS[estimator](logp, ref_logp)
