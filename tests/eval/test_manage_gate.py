"""The manager's release gate on the management benchmark: paired by scenario, guarded by false deletions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsdk.errors import InvalidInput
from memsdk.eval.manage.gate import FALSE_DELETIONS, manage_gate, per_class, scenario_reward
from memsdk.eval.manage.metrics import fact_outcome, summarize
from memsdk.eval.manage.results import ManageConfig, ManageReport, ScenarioResult
from memsdk.eval.results import IngestStats

from .test_manage_runner import fact, rec

T0 = datetime(2024, 3, 2, 10, tzinfo=UTC)


def run(manager: str, retired: list[bool], *, lose_current: bool = False) -> ManageReport:
    """One scenario per entry: Boston must be retired (``retired``) and Austin kept."""
    scenarios = []
    for i, gone in enumerate(retired):
        boston = fact_outcome(fact("Boston", "superseded"), [] if gone else [rec("Boston", sources=("D1:1",))])
        austin = fact_outcome(fact("Austin", "current", stated_in=("D2:1",)), [] if lose_current and i == 0 else [rec("Austin", sources=("D2:1",))])
        scenarios.append(ScenarioResult(id=f"val-{i:03d}", events=["supersede"], turns=2, ingest=IngestStats(), facts=[boston, austin], questions=[], checks=[], wall_s=0.0))
    return ManageReport(split="val", config=ManageConfig(), policies={"manager": manager}, started_at=T0, wall_s=0.0, scenarios=scenarios, summary=summarize(scenarios))


def test_a_scenarios_reward_is_the_share_of_its_facts_that_ended_right() -> None:
    rules, trained = run("heuristic", [False] * 20), run("pairs-v1", [True] * 20)
    assert scenario_reward(rules.scenarios[0]) == 0.5 and scenario_reward(trained.scenarios[0]) == 1.0
    decision = manage_gate(trained, rules)
    assert decision.passed and decision.paired.mean_diff == pytest.approx(0.5) and decision.on == "manage-val"
    assert per_class(trained, rules)["supersede"].wins == 20


def test_a_tie_fails_and_one_false_deletion_fails_whatever_the_gain() -> None:
    rules = run("heuristic", [False] * 20)
    assert not manage_gate(run("same", [False] * 20), rules).passed
    greedy = manage_gate(run("greedy", [True] * 20, lose_current=True), rules)
    assert not greedy.passed and any(FALSE_DELETIONS in r for r in greedy.reasons)


def test_runs_of_different_scenarios_are_not_compared() -> None:
    with pytest.raises(InvalidInput, match="same scenarios"):
        manage_gate(run("a", [True] * 3), run("b", [True] * 4))
