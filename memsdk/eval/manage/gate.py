"""The release gate on the management benchmark: a manager serves only when it beats the one
serving now, scenario by scenario, on the same generated conversations.

Each scenario is one paired state (`memsdk.gate`): its reward is the share of its
gold facts that ended as they must (`FactOutcome.passed`: a forgotten value gone from every
tier, a superseded one out of the current view, a current one kept). Guard: the false
deletion rate (current values no live record holds any more), which may not rise at all.
`per_class` runs the same paired bootstrap on each event class's facts, so a candidate that
wins overall but loses the forget class shows it.
"""

from __future__ import annotations

from collections import defaultdict

from memsdk.errors import InvalidInput
from memsdk.eval.manage.results import ManageReport, ScenarioResult
from memsdk.gate import GateConfig, GateDecision, Paired, SideResult, decide, paired_comparison

__all__ = ["scenario_reward", "side", "manage_gate", "per_class"]

#: the guard: false deletions per current fact; GateConfig's default tolerance for it is 0
FALSE_DELETIONS = "false_deletion_rate"


def scenario_reward(result: ScenarioResult) -> float:
    """The share of the scenario's gold facts that passed; 1 for a scenario without facts."""
    return sum(f.passed for f in result.facts) / len(result.facts) if result.facts else 1.0


def side(report: ManageReport) -> SideResult:
    """One manager's run as the gate reads it."""
    current = [f for s in report.scenarios for f in s.facts if f.fact.status == "current"]
    rates = {f"{r.metric}/{r.event}": r.rate for r in report.summary.rates if r.rate is not None}
    return SideResult(
        version=report.policies.get("manager", "?"),
        rewards=[scenario_reward(s) for s in report.scenarios],
        guards={FALSE_DELETIONS: report.summary.false_deletions / max(1, len(current))},
        metrics=rates,
        latency_p50_s=report.summary.cost.ingest_p50_s or 0.0,
    )


def _paired_ids(candidate: ManageReport, incumbent: ManageReport) -> None:
    if candidate.split != incumbent.split or [s.id for s in candidate.scenarios] != [s.id for s in incumbent.scenarios]:
        raise InvalidInput("reports", "the gate compares two runs of the same scenarios (same split, seed and size)")


def manage_gate(candidate: ManageReport, incumbent: ManageReport, *, config: GateConfig = GateConfig()) -> GateDecision:
    """The decision for ``candidate``'s manager against ``incumbent``'s (`memsdk.gate.decide`)."""
    _paired_ids(candidate, incumbent)
    return decide("manager", side(candidate), side(incumbent), on=f"manage-{candidate.split}", config=config)


def per_class(candidate: ManageReport, incumbent: ManageReport, *, config: GateConfig = GateConfig()) -> dict[str, Paired]:
    """Per event class, the paired bootstrap over its facts (1 passed, 0 not), fact by fact."""
    _paired_ids(candidate, incumbent)
    outcomes: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for c, i in zip(candidate.scenarios, incumbent.scenarios):
        for fc, fi in zip(c.facts, i.facts):
            outcomes[fc.fact.event][0].append(float(fc.passed))
            outcomes[fc.fact.event][1].append(float(fi.passed))
    return {
        event: paired_comparison(cand, inc, confidence=config.confidence, resamples=config.resamples, seed=config.seed)
        for event, (cand, inc) in sorted(outcomes.items())
    }
