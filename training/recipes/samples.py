"""What a sampler hands the learner: groups of scored members, each with the model calls
that earned its reward; and the `Sampler` protocol that draws them.

A member (`Sampled`) is one reply for single-call recipes (the manager, the answerer, one
Mem-alpha write step) or every extractor and manager call of a session (Memory-R2): each of
its calls is one row of the update and takes the member's advantage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from memsdk.llm.base import SamplingParams

__all__ = ["Completion", "Sampled", "SampledGroup", "Sampler"]

S_in = TypeVar("S_in", contravariant=True)  # a sampler only takes states in


@dataclass(frozen=True)
class Completion:
    """One model call of the policy being trained: what the update scores."""

    prompt: str  # rendered: exactly the text generation started from
    token_ids: tuple[int, ...]
    parse_failed: bool = False


@dataclass(frozen=True)
class Sampled:
    """One member of a group: a reward and every call that earned it (one reply; or, for a
    Memory-R2 session, each extractor and manager call), all of which take its advantage."""

    reward: float
    completions: tuple[Completion, ...]
    text: str = ""  # the reply as the runtime parsed it (single-call samples), for inspection
    terms: Mapping[str, float] = field(default_factory=dict)  # the reward's parts, each logged as its mean

    @classmethod
    def reply(cls, prompt: str, token_ids: Sequence[int], text: str, reward: float, *, parse_failed: bool = False, terms: Mapping[str, float] | None = None) -> Sampled:
        """A single-call sample: one reply to ``prompt``."""
        return cls(reward, (Completion(prompt, tuple(token_ids), parse_failed),), text, dict(terms or {}))


@dataclass(frozen=True)
class SampledGroup:
    key: str
    samples: tuple[Sampled, ...]
    #: members re-rolled from one anchor rollout's state (LoGo's local groups): normalised on
    #: their own like any group, but left out of the step's reward mean, which is the policy's
    local: bool = False

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]


class Sampler(Protocol[S_in]):
    def sample(self, state: S_in, params: SamplingParams, *, seed: int) -> Sequence[SampledGroup]:
        """The groups one state yields (params.n members each), every member scored."""
        ...

    def evaluate(self, states: Sequence[S_in]) -> dict[str, float]:
        """Greedy replies of the current policy on held-out states -> metrics (key "reward" required)."""
        ...

    def key(self, state: S_in) -> str: ...
