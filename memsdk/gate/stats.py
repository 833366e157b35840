"""The release gate: a checkpoint serves only when it beats the version serving now.

The candidate and the incumbent answer the same fixed evaluation states with the same
frozen parts; each state gives both a reward, so the comparison is paired:

    d_i = r_i(candidate) - r_i(incumbent)                 one difference per state
    mean d, and its (1 - alpha) bootstrap interval        resample the d_i with replacement B times
    win / tie / loss = #{d_i > 0} / #{d_i = 0} / #{d_i < 0}

The gate passes when the interval's lower bound is above ``margin`` (the candidate is
better, not merely lucky) and no guard metric regressed beyond its tolerance (parse
failures, rejected ops: higher is worse; recall: lower is worse). A tie fails: a new
version must earn its place. The decision, with its figures, is written beside the
candidate's manifest (`PolicyRegistry.record_decision`) and every promotion, forced or
not, is appended to the role's audit trail.

States from several sources (generated scenarios, pairs written by people, a benchmark's
questions) are gated pooled, with a per-source guard (`decide_pooled`): the interval of the
pooled differences must clear the margin, and no source may be worse beyond its own
interval (its upper bound below zero), so a big win on one source cannot hide a loss on
another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsdk.errors import InvalidInput, PolicyError
from memsdk.types import utcnow

__all__ = ["GateFailed", "GateConfig", "Paired", "Guard", "SideResult", "SourceCheck", "GateDecision", "paired_comparison", "decide", "decide_pooled", "GUARD_DIRECTIONS"]

#: guard metric -> True when a higher value is worse
GUARD_DIRECTIONS = {"parse_failure_rate": True, "rejected_op_rate": True, "recall": False}


class GateConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    margin: float = Field(0.0, description="The lower confidence bound of the mean reward difference must exceed this.")
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    resamples: int = Field(2000, ge=100)
    seed: int = 0
    tolerances: dict[str, float] = Field(
        default_factory=lambda: {"parse_failure_rate": 0.02, "rejected_op_rate": 0.02, "recall": 0.0},
        description="How far each guard metric may move the wrong way before the gate fails.",
    )


class Paired(BaseModel):
    model_config = ConfigDict(frozen=True)

    n: int
    mean_diff: float
    ci_low: float
    ci_high: float
    wins: int
    ties: int
    losses: int


class Guard(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    candidate: float
    incumbent: float
    tolerance: float
    ok: bool


class SideResult(BaseModel):
    """One policy over the evaluation states: a reward per state, and what it cost."""

    model_config = ConfigDict(frozen=True)

    version: str
    rewards: list[float]
    guards: dict[str, float] = Field(default_factory=dict)
    #: reported beside the reward, never gated on (an answerer's EM and BLEU-1 beside its F1)
    metrics: dict[str, float] = Field(default_factory=dict)
    latency_p50_s: float = 0.0
    latency_p95_s: float = 0.0
    prompt_tokens: float = 0.0  # per state
    completion_tokens: float = 0.0

    @property
    def mean(self) -> float:
        return float(np.mean(self.rewards)) if self.rewards else 0.0


class SourceCheck(BaseModel):
    """One source of a pooled decision: its own paired comparison and guards. ``ok``: its
    interval's upper bound is not below zero and its guards hold."""

    model_config = ConfigDict(frozen=True)

    source: str
    paired: Paired
    guards: list[Guard] = Field(default_factory=list)
    ok: bool


class GateDecision(BaseModel):
    """What the release gate decided for ``candidate`` against ``incumbent`` on the states
    ``on``, with the figures it decided on (`paired`, `guards`) and, when it failed, why
    (`reasons`). `evaluate_policy` returns it and writes it beside the candidate's manifest."""

    model_config = ConfigDict(frozen=True)

    role: str
    candidate: SideResult
    incumbent: SideResult
    on: str  # what the states were (locomo-val, a file, the log)
    paired: Paired
    guards: list[Guard]
    passed: bool
    reasons: list[str]
    config: GateConfig
    decided_at: datetime = Field(default_factory=utcnow)
    #: a pooled decision's per-source lines (`decide_pooled`); empty for one source
    sources: list[SourceCheck] = Field(default_factory=list)

    def summary(self) -> str:
        """One line: the verdict, both means, the paired difference with its interval, win / tie / loss."""
        p = self.paired
        verdict = "PASS" if self.passed else "FAIL"
        lines = "".join(f"\n  {c.source}: {c.paired.mean_diff:+.3f} [{c.paired.ci_low:+.3f}, {c.paired.ci_high:+.3f}] n={c.paired.n}{'' if c.ok else ' WORSE'}" for c in self.sources)
        return (
            f"{verdict} {self.role} {self.candidate.version} vs {self.incumbent.version} on {self.on}: "
            f"mean reward {self.candidate.mean:.3f} vs {self.incumbent.mean:.3f}, diff {p.mean_diff:+.3f} "
            f"[{p.ci_low:+.3f}, {p.ci_high:+.3f}] ({self.config.confidence:.0%}), win/tie/loss {p.wins}/{p.ties}/{p.losses}"
            + ("" if self.passed else f"; {'; '.join(self.reasons)}")
            + lines
        )


def paired_comparison(candidate: Sequence[float], incumbent: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Paired:
    """The paired statistics of the module docstring: mean difference, percentile bootstrap
    interval (seeded, so a decision can be reproduced), win / tie / loss."""
    if len(candidate) != len(incumbent):
        raise InvalidInput("rewards", f"paired rewards need one value per state on both sides, got {len(candidate)} and {len(incumbent)}")
    if not candidate:
        raise InvalidInput("states", "the gate needs at least one evaluation state")
    diffs = np.asarray(candidate, dtype=np.float64) - np.asarray(incumbent, dtype=np.float64)
    means = diffs[np.random.default_rng(seed).integers(0, len(diffs), size=(resamples, len(diffs)))].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Paired(
        n=len(diffs), mean_diff=float(diffs.mean()), ci_low=float(low), ci_high=float(high),
        wins=int((diffs > 0).sum()), ties=int((diffs == 0).sum()), losses=int((diffs < 0).sum()),
    )  # fmt: skip


def _guards(candidate: SideResult, incumbent: SideResult, config: GateConfig) -> list[Guard]:
    guards = []
    for name in sorted(set(candidate.guards) & set(incumbent.guards)):
        worse = candidate.guards[name] - incumbent.guards[name]
        if not GUARD_DIRECTIONS.get(name, True):
            worse = -worse
        tolerance = config.tolerances.get(name, 0.0)
        guards.append(Guard(name=name, candidate=candidate.guards[name], incumbent=incumbent.guards[name], tolerance=tolerance, ok=worse <= tolerance + 1e-12))
    return guards


def _regressions(guards: Sequence[Guard], where: str = "") -> list[str]:
    return [f"{where}{g.name} regressed from {g.incumbent:.3f} to {g.candidate:.3f} (tolerance {g.tolerance:.3f})" for g in guards if not g.ok]


def _compare(candidate: Sequence[float], incumbent: Sequence[float], config: GateConfig) -> Paired:
    return paired_comparison(candidate, incumbent, confidence=config.confidence, resamples=config.resamples, seed=config.seed)


def _margin(paired: Paired, config: GateConfig) -> list[str]:
    if paired.ci_low > config.margin:
        return []
    return [f"the lower bound {paired.ci_low:+.3f} of the reward difference is not above the margin {config.margin:+.3f}"]


def decide(role: str, candidate: SideResult, incumbent: SideResult, *, on: str, config: GateConfig = GateConfig()) -> GateDecision:
    """Pass iff the lower bound beats ``margin`` and every shared guard holds its tolerance."""
    paired = _compare(candidate.rewards, incumbent.rewards, config)
    guards = _guards(candidate, incumbent, config)
    reasons = _margin(paired, config) + _regressions(guards)
    return GateDecision(role=role, candidate=candidate, incumbent=incumbent, on=on, paired=paired, guards=guards, passed=not reasons, reasons=reasons, config=config)


def decide_pooled(role: str, sides: Mapping[str, tuple[SideResult, SideResult]], *, config: GateConfig = GateConfig()) -> GateDecision:
    """The pooled decision of the module docstring over ``sides`` (source -> (candidate,
    incumbent), each paired state by state). The pooled rewards are the sources' states
    together, each state one unit: a source weighs as many states as it has."""
    if not sides:
        raise InvalidInput("sides", "a pooled gate needs at least one source")
    checks, reasons = [], []
    for source, (cand, inc) in sides.items():
        paired, guards = _compare(cand.rewards, inc.rewards, config), _guards(cand, inc, config)
        worse = [f"{source} is worse beyond its interval: {paired.mean_diff:+.3f} [{paired.ci_low:+.3f}, {paired.ci_high:+.3f}]"] if paired.ci_high < 0 else []
        problems = worse + _regressions(guards, f"{source}: ")
        checks.append(SourceCheck(source=source, paired=paired, guards=guards, ok=not problems))
        reasons += problems
    first_c, first_i = next(iter(sides.values()))
    pooled_c = SideResult(version=first_c.version, rewards=[r for c, _ in sides.values() for r in c.rewards], metrics={f"{s}/mean": c.mean for s, (c, _) in sides.items()})
    pooled_i = SideResult(version=first_i.version, rewards=[r for _, i in sides.values() for r in i.rewards], metrics={f"{s}/mean": i.mean for s, (_, i) in sides.items()})
    paired = _compare(pooled_c.rewards, pooled_i.rewards, config)
    reasons = _margin(paired, config) + reasons
    on = "pooled: " + " + ".join(sides)
    return GateDecision(role=role, candidate=pooled_c, incumbent=pooled_i, on=on, paired=paired, guards=[g.model_copy(update={"name": f"{c.source}/{g.name}"}) for c in checks for g in c.guards],
                        passed=not reasons, reasons=reasons, config=config, sources=checks)  # fmt: skip


class GateFailed(PolicyError):
    """The release gate kept a candidate from serving; ``decision`` holds its figures. A
    `PolicyError` of `memsdk.errors`' tree, defined beside the decision it carries."""

    def __init__(self, decision: GateDecision) -> None:
        self.decision = decision
        super().__init__(decision.summary())
