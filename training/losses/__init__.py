"""Losses for policy-gradient training; one module per idea, each per-token then aggregated.

aggregation  aggregate(per_token, mask, mode): token-mean / seq-mean-token-mean / step-mean
ppo          clipped surrogate: asymmetric and dual clip, token / sequence / step ratio
kl           k1, k2, k3 estimators of KL(pi || pi_ref)
entropy      entropy bonus from logits
value        GAE, the clipped value-head loss, batch whitening, explained variance
"""

from .aggregation import AggregationMode, StepMeans, aggregate, row_step_ids, step_means
from .entropy import EntropyBonus, entropy_bonus, token_entropy
from .kl import KLEstimator, kl_estimate, kl_k1, kl_k2, kl_k3
from .ppo import (
    PolicyRatio,
    PPOClipConfig,
    PPOLossOutput,
    RatioLevel,
    SurrogateTerms,
    clipped_surrogate,
    policy_ratio,
    ppo_clip_loss,
)
from .value import (
    GAEOutput,
    ValueLossOutput,
    clipped_value_loss,
    explained_variance,
    gae,
    terminal_rewards,
    whiten,
)

__all__ = [
    "AggregationMode",
    "EntropyBonus",
    "GAEOutput",
    "KLEstimator",
    "PPOClipConfig",
    "PPOLossOutput",
    "PolicyRatio",
    "RatioLevel",
    "StepMeans",
    "SurrogateTerms",
    "ValueLossOutput",
    "aggregate",
    "clipped_surrogate",
    "clipped_value_loss",
    "entropy_bonus",
    "explained_variance",
    "gae",
    "kl_estimate",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "policy_ratio",
    "ppo_clip_loss",
    "row_step_ids",
    "step_means",
    "terminal_rewards",
    "token_entropy",
    "whiten",
]
