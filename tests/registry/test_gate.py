"""The release gate's statistics and decision rule, against hand-computed values."""

from __future__ import annotations

import pytest

from memsdk.errors import InvalidInput
from memsdk.gate import GateConfig, SideResult, decide, decide_pooled, paired_comparison


def side(version: str, rewards: list[float], **guards: float) -> SideResult:
    return SideResult(version=version, rewards=rewards, guards=guards)


def test_paired_statistics_by_hand() -> None:
    # d = (1, 0, -0.5, 0.5): mean .25, one tie, two wins, one loss
    p = paired_comparison([1.0, 0.5, 0.0, 1.0], [0.0, 0.5, 0.5, 0.5], resamples=500, seed=1)
    assert (p.n, p.wins, p.ties, p.losses) == (4, 2, 1, 1)
    assert p.mean_diff == pytest.approx(0.25)
    assert -0.5 <= p.ci_low <= p.mean_diff <= p.ci_high <= 1.0
    # seeded: the same decision is reproduced
    assert paired_comparison([1.0, 0.5, 0.0, 1.0], [0.0, 0.5, 0.5, 0.5], resamples=500, seed=1) == p


def test_a_constant_difference_has_a_point_interval() -> None:
    p = paired_comparison([0.75] * 5, [0.25] * 5)
    assert p.ci_low == pytest.approx(0.5) and p.ci_high == pytest.approx(0.5) and p.wins == 5


def test_unpaired_or_empty_rewards_are_refused() -> None:
    with pytest.raises(InvalidInput, match="one value per state"):
        paired_comparison([1.0], [1.0, 0.0])
    with pytest.raises(InvalidInput, match="at least one"):
        paired_comparison([], [])


def test_a_clearly_better_candidate_passes_and_a_worse_one_fails() -> None:
    good, bad = side("good", [1.0] * 20), side("bad", [0.0] * 10 + [1.0] * 10)
    assert decide("answerer", good, bad, on="t").passed
    worse = decide("answerer", bad, good, on="t")
    assert not worse.passed and "lower bound" in worse.reasons[0]


def test_a_tie_fails_a_new_version_must_earn_its_place() -> None:
    same = decide("answerer", side("new", [0.5] * 10), side("old", [0.5] * 10), on="t")
    assert not same.passed and same.paired.ties == 10


def test_the_margin_is_on_the_lower_bound() -> None:
    a, b = side("a", [0.6] * 10), side("b", [0.5] * 10)
    assert decide("answerer", a, b, on="t", config=GateConfig(margin=0.05)).passed
    assert not decide("answerer", a, b, on="t", config=GateConfig(margin=0.2)).passed


def test_a_guard_regression_fails_even_a_better_reward() -> None:
    better_but_brittle = side("new", [1.0] * 10, parse_failure_rate=0.3)
    decision = decide("answerer", better_but_brittle, side("old", [0.0] * 10, parse_failure_rate=0.0), on="t")
    assert not decision.passed and "parse_failure_rate regressed" in decision.reasons[0]
    # recall is a lower-is-worse guard; within tolerance passes
    ok = decide("answerer", side("new", [1.0] * 10, recall=0.80), side("old", [0.0] * 10, recall=0.81), on="t", config=GateConfig(tolerances={"recall": 0.02}))
    assert ok.passed and ok.guards[0].ok
    assert not decide("answerer", side("new", [1.0] * 10, recall=0.70), side("old", [0.0] * 10, recall=0.81), on="t").passed


def test_a_pooled_gate_passes_a_win_on_one_source_and_ties_on_the_others() -> None:
    # written pairs: 20 states, the candidate right on 10 more; scenarios: 10 ties
    sides = {
        "written": (side("new", [1.0] * 20), side("old", [1.0] * 10 + [0.0] * 10)),
        "scenarios": (side("new", [1.0] * 10, false_deletion_rate=0.0), side("old", [1.0] * 10, false_deletion_rate=0.0)),
    }
    decision = decide_pooled("manager", sides, config=GateConfig(resamples=500))
    assert decision.passed and decision.on == "pooled: written + scenarios"
    assert decision.paired.n == 30 and decision.paired.mean_diff == pytest.approx(10 / 30)
    assert [(c.source, c.ok) for c in decision.sources] == [("written", True), ("scenarios", True)]
    assert [g.name for g in decision.guards] == ["scenarios/false_deletion_rate"]
    assert "scenarios: +0.000 [+0.000, +0.000] n=10" in decision.summary()


def test_a_source_worse_beyond_its_interval_fails_a_pooled_win() -> None:
    # the pooled mean is up (+15 on written, -5 on scenarios), but every scenario loss is a loss
    sides = {
        "written": (side("new", [1.0] * 30), side("old", [1.0] * 15 + [0.0] * 15)),
        "scenarios": (side("new", [0.0] * 5 + [1.0] * 5), side("old", [1.0] * 10)),
    }
    decision = decide_pooled("manager", sides, config=GateConfig(resamples=500))
    assert decision.paired.ci_low > 0 and not decision.passed
    assert [c.ok for c in decision.sources] == [True, False]
    assert len(decision.reasons) == 1 and decision.reasons[0].startswith("scenarios is worse beyond its interval: -0.500 [")


def test_a_guard_of_one_source_fails_the_pooled_gate() -> None:
    sides = {"scenarios": (side("new", [1.0] * 10, false_deletion_rate=0.1), side("old", [0.0] * 10, false_deletion_rate=0.0))}
    decision = decide_pooled("manager", sides, config=GateConfig(resamples=500))
    assert not decision.passed and decision.reasons == ["scenarios: false_deletion_rate regressed from 0.000 to 0.100 (tolerance 0.000)"]
    with pytest.raises(InvalidInput):
        decide_pooled("manager", {})
