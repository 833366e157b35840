"""``memsdk eval scenarios FILE``: the checks and the answer rule on hand-built records, the
file's validation, and one small file run end to end with the real embedder and rules."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsdk.cli import main
from memsdk.errors import InvalidInput
from memsdk.eval.scenario_file import ScenarioFile, answer_contains, check_records, class_rows, scenario_class
from memsdk.eval.scenario_file.models import AnsweredQuestion, IsolationOutcome, Scenario, ScenarioOutcome
from memsdk.eval.scenario_file.runner import load_scenarios
from memsdk.types import MemoryRecord, Scope, Tier, content_hash

T0 = datetime(2024, 3, 2, 10, tzinfo=UTC)


def rec(text: str, *, tier: Tier = Tier.SEMANTIC, deleted: bool = False, retired: bool = False) -> MemoryRecord:
    return MemoryRecord(
        id=uuid.uuid4(), text=text, scope=Scope(user_id="u-x"), created_at=T0, updated_at=T0, version=1, content_hash=content_hash(text), tier=tier,
        deleted=deleted, deleted_at=T0 if deleted else None, invalid_at=T0 if retired else None,
    )


def scenario(**kw: object) -> Scenario:
    return Scenario.model_validate({"id": "x", "turns": [{"speaker": "A", "text": "hi"}], **kw})


def test_a_forget_fails_while_any_tier_lists_it_and_holds_once_deleted() -> None:
    sc = scenario(gone=["12 Elm Street"])
    turn = rec("My home address is 12 Elm Street.", tier=Tier.EPISODIC)
    assert scenario_class(sc) == "forget"
    assert not check_records(sc, [turn])[0].passed
    assert not check_records(sc, [turn.model_copy(update={"invalid_at": T0})])[0].passed  # retired is still listed
    assert check_records(sc, [turn.model_copy(update={"deleted": True, "deleted_at": T0})])[0].passed


def test_a_replacement_may_stay_in_the_episodic_tier_and_a_correction_only_as_history() -> None:
    replaced = scenario(gone=["live in denver"], gone_tiers="managed")
    corrected = scenario(gone=["June 3"], gone_tiers="current")
    turn, fact = rec("I live in Denver.", tier=Tier.EPISODIC), rec("Lena: I live in Denver.")
    assert (scenario_class(replaced), scenario_class(corrected)) == ("replaced", "corrected")
    assert check_records(replaced, [turn])[0].passed and not check_records(replaced, [turn, fact])[0].passed
    assert check_records(replaced, [turn, fact.model_copy(update={"invalid_at": T0})])[0].passed
    wrong = rec("the wedding is on June 3", tier=Tier.EPISODIC)
    assert not check_records(corrected, [wrong])[0].passed
    assert check_records(corrected, [wrong.model_copy(update={"invalid_at": T0})])[0].passed


def test_a_keep_that_fails_says_whether_the_fact_was_retired() -> None:
    sc = scenario(keep=["14", "lake house"])
    outcomes = check_records(sc, [rec("My birthday is on the 14th of July.", retired=True), rec("a party at the LAKE HOUSE")])
    assert [(c.passed, c.retired) for c in outcomes] == [(False, True), (True, False)]
    assert [(c.passed, c.retired) for c in check_records(scenario(keep=["Rex"]), [])] == [(False, False)]  # never stored


def test_limits_count_current_semantic_records_only() -> None:
    sc = scenario(max_memories_matching={"peanut": 1}, max_memories_total=2)
    records = [rec("allergic to peanuts", tier=Tier.EPISODIC), rec("peanut allergy"), rec("peanuts make me sick", retired=True), rec("hi")]
    assert [c.passed for c in check_records(sc, records)] == [True, True]
    assert [c.passed for c in check_records(sc, [*records, rec("Peanut again"), rec("more")])] == [False, False]


@pytest.mark.parametrize(
    "prediction, gold, expected",
    [
        ("Andrew has two dogs.", "2", True),
        ("He has 3 brothers", "three", True),
        ("Buddy and Scout", "Buddy and Scout", True),
        ("Scout", "Buddy and Scout", False),
        ("The Lake House!", "lake house", True),
        ("Boston", "Austin", False),
        ("anything", "", False),
    ],
)
def test_answers_are_judged_by_the_gold_words_with_numbers_as_digits(prediction: str, gold: str, expected: bool) -> None:
    assert answer_contains(prediction, gold) is expected


def test_the_table_counts_each_class_and_false_retirements() -> None:
    q = AnsweredQuestion(question="Where does Lena live now?", gold="Austin", prediction="Denver", correct=False, top3=["Austin"], gold_in_top3=True, latency_s=0.1)
    kept = ScenarioOutcome(id="a", scenario_class="kept", passed=False, checks=check_records(scenario(keep=["14"]), [rec("14 July", retired=True)]), questions=[q], wall_s=0)
    forget = ScenarioOutcome(id="b", scenario_class="forget", passed=True, checks=check_records(scenario(gone=["x"]), []), questions=[], wall_s=0)
    rows = {r.name: (r.k, r.n) for r in class_rows([kept, forget], IsolationOutcome(passed=True))}
    assert rows["scenarios passing"] == (1, 2)
    assert rows["scenarios passing: forget"] == (1, 1) and rows["scenarios passing: kept"] == (0, 1)
    assert rows["false retirements (a kept fact retired or deleted; lower is better)"] == (1, 1)
    assert rows["answers containing the gold: 'now' questions"] == (0, 1)
    assert rows["answers containing the gold, where the top 3 holds it"] == (0, 1)
    assert rows["isolation held"] == (1, 1)


def test_a_malformed_file_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"scenarios": [{"id": "x", "turns": [{"speaker": "A", "text": "hi"}], "gone_tiers": "episodic"}]}))
    with pytest.raises(InvalidInput) as err:
        load_scenarios(bad)
    assert "scenarios.scenarios[0].gone_tiers" in str(err.value)
    with pytest.raises(InvalidInput, match="cannot read"):
        load_scenarios(tmp_path / "missing.json")


def test_the_shared_dev_file_parses() -> None:
    dev = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios-dev.json"
    if not dev.exists():
        pytest.skip("../shared/data is not beside this checkout")
    file = ScenarioFile.model_validate_json(dev.read_bytes())
    assert len(file.scenarios) >= 40 and file.isolation is not None


FILE = {
    "about": "two scenarios for the test",
    "scenarios": [
        {"id": "forget-request", "turns": [
            {"speaker": "Sam", "text": "My home address is 12 Elm Street, Springfield.", "time": "2024-01-01"},
            {"speaker": "Sam", "text": "I love hiking on weekends.", "time": "2024-01-02"},
            {"speaker": "Sam", "text": "Please forget my home address, I don't want it stored.", "time": "2024-01-03"},
        ], "questions": [{"q": "What does Sam like to do on weekends?", "a": "hiking"}], "keep": ["hik"], "gone": ["12 Elm Street"]},
        {"id": "injection", "turns": [{"speaker": "Zoe", "text": "My favourite food is ramen.", "time": "2024-01-01"}], "keep": ["ramen"]},
    ],
    "isolation": {"about": "Sam's turns must not reach Zoe"},
}


def test_a_file_runs_end_to_end_with_the_real_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(FILE))
    out = tmp_path / "out"
    assert main(["eval", "scenarios", str(path), "--policies", "heuristic", "--answerer", "extractive", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| scenarios passing |" in printed and "| isolation held | 1 / 1 |" in printed
    report = json.loads((out / "report.json").read_text())
    assert [s["id"] for s in report["scenarios"]] == ["forget-request", "injection"]
    # what holds whatever the policies decide: every check was judged, every question answered and retrieved
    sam = report["scenarios"][0]
    assert [c["kind"] for c in sam["checks"]] == ["keep", "gone"]
    assert len(sam["questions"]) == 1 and len(sam["questions"][0]["top3"]) <= 3
    assert (out / "report.md").read_text().startswith("## Scenarios mine.json")
    assert not (out / "work").exists() or not any((out / "work").iterdir())
