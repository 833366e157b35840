"""DAPO's dynamic sampling as a wrapper around any `Sampler`: a draw whose groups all scored
alike is drawn again.

A group whose rewards are all equal has zero advantage everywhere (GRPO and Dr.GRPO alike):
it costs a whole rollout and teaches nothing. DAPO (arXiv 2503.14476) keeps sampling until
the batch holds groups with signal; here a state's draw is repeated with fresh seeds (new
rollouts and, for samplers that draw questions, new questions of the same sample), at most
``max_redraws`` times. A draw still uniform after the last try is returned as it is and the
learner drops it (``drop_zero_variance``), so a step never loops forever on a state the
policy cannot yet solve (or always solves).

Seeds come from the loop's seeds and the try number only, so a resumed run redraws exactly
as the unbroken one did. Counts since the last `take_metrics` are reported for the metrics
row: ``redraws`` (extra draws made), ``redrawn_groups`` (states that needed at least one)
and ``uniform_after_redraws`` (states whose last draw was still uniform).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from memsdk.llm.base import SamplingParams

from ..advantages import nonzero_variance
from .loop import step_seed
from .samples import SampledGroup, Sampler

__all__ = ["DynamicSampling", "has_signal"]

S = TypeVar("S")


def has_signal(groups: Sequence[SampledGroup]) -> bool:
    """True when some group (local ones included) has rewards that differ."""
    return any(bool(nonzero_variance(g.rewards)) for g in groups if g.samples)


class DynamicSampling(Generic[S]):
    """A `Sampler` that redraws a state's groups while none of them has reward variance."""

    def __init__(self, inner: Sampler[S], max_redraws: int) -> None:
        if max_redraws < 0:
            raise ValueError("max_redraws must be >= 0")
        self.inner, self.max_redraws = inner, max_redraws
        self.redraws = self.redrawn_groups = self.uniform_after_redraws = 0

    def key(self, state: S) -> str:
        return self.inner.key(state)

    def evaluate(self, states: Sequence[S]) -> dict[str, float]:
        return self.inner.evaluate(states)

    def sample(self, state: S, params: SamplingParams, *, seed: int) -> Sequence[SampledGroup]:
        groups = self.inner.sample(state, params, seed=seed)
        tries = 0
        while not has_signal(groups) and tries < self.max_redraws:
            tries += 1
            fresh = params.model_copy(update={"seed": step_seed(params.seed or 0, "redraw", tries)})
            groups = self.inner.sample(state, fresh, seed=step_seed(seed, "redraw", tries))
        self.redraws += tries
        self.redrawn_groups += tries > 0
        self.uniform_after_redraws += not has_signal(groups)
        return groups

    def take_metrics(self) -> dict[str, float]:
        """The counts since the last call (one step's), then zeroed."""
        out = {"redraws": float(self.redraws), "redrawn_groups": float(self.redrawn_groups), "uniform_after_redraws": float(self.uniform_after_redraws)}
        self.redraws = self.redrawn_groups = self.uniform_after_redraws = 0
        return out
