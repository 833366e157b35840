"""Scores against values worked by hand (the answer metrics' own edge cases live in
tests/training/rewards/test_qa.py, which runs on this same implementation)."""

from __future__ import annotations

import math

import pytest

from memsdk.eval.results import QuestionResult, percentile, scores
from memsdk.scoring import bleu1, chance_recall, chance_session_recall, evidence_ids, evidence_recall, exact_match, session_of, session_recall, token_f1


def test_the_trainer_rewards_are_this_implementation():
    from memsdk_training.rewards import qa

    assert (qa.token_f1, qa.bleu1, qa.exact_match, qa.normalize_answer) == (token_f1, bleu1, exact_match, qa.normalize_answer)
    assert qa.token_f1.__module__ == "memsdk.scoring"


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        # one clipped match, |pred| = 1 < |gold| = 2: p1 = 1, BP = exp(1 - 2/1)
        ("dog", "big dog", math.exp(-1)),
        # "the" dropped: pred [big, brown, dog, runs], 1 match, longer than gold: 1/4
        ("The big brown dog runs", "dog", 0.25),
        # gold [7, may, 2023] vs pred [may, 7]: 2 matches / 2, BP = exp(1 - 3/2)
        ("May 7", "7 May, 2023", math.exp(-0.5)),
    ],
)
def test_bleu1_by_hand(pred, gold, expected):
    assert bleu1(pred, gold) == pytest.approx(expected, abs=1e-12)


def test_f1_and_em_by_hand():
    # pred [she, went, to, paris, in, may], gold [paris]: P = 1/6, R = 1, F1 = 2/7
    assert token_f1("She went to Paris in May.", "Paris") == pytest.approx(2 / 7, abs=1e-12)
    assert exact_match("  PARIS! ", "paris") == 1.0


def test_evidence_ids_repairs_locomo_typos():
    assert evidence_ids(["D8:6; D9:17", "D:11:26", "D", "D1:3"]) == {"D8:6", "D9:17", "D11:26", "D1:3"}


def test_evidence_recall_at_k():
    ranked = [("D1:1",), ("D1:2", "D1:3"), (), ("D2:1",)]
    gold = ["D1:3", "D2:1"]
    assert [evidence_recall(ranked, gold, k) for k in (1, 2, 3, 4, 60)] == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert evidence_recall(ranked, [], 10) is None


def test_percentile_matches_linear_interpolation():
    # positions (n - 1) * q: 1.5 -> 2.5, 2.85 -> 3 + 0.85
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([4, 1, 3, 2], 95) == pytest.approx(3.85)
    assert percentile([], 50) is None


def _q(f1: float, judge, recall) -> QuestionResult:
    return QuestionResult(question="q", gold="g", category=1, category_name="multi-hop", prediction="p", f1=f1, bleu1=f1, em=0.0, judge=judge, recall=recall, latency_s=0.1)


def test_scores_count_j_over_judged_and_recall_over_questions_with_evidence():
    s = scores([_q(1.0, "CORRECT", {10: 1.0}), _q(0.5, "WRONG", {10: None}), _q(0.0, None, {10: 0.0})], ks=(10,))
    assert (s.n, s.f1, s.judged, s.j, s.recall) == (3, 0.5, 2, 0.5, {10: 0.5})


def test_scores_average_session_recall_and_its_chance_over_questions_with_evidence():
    with_sessions = [
        _q(1.0, None, {10: 1.0}).model_copy(update={"session_recall_any": {1: 1.0}, "session_recall_all": {1: 0.0}, "chance": {"session_recall_any": {1: 0.25}}}),
        _q(0.0, None, {10: 0.0}).model_copy(update={"session_recall_any": {1: 0.0}, "session_recall_all": {1: 0.0}, "chance": {"session_recall_any": {1: 0.75}}}),
        _q(0.0, None, {10: None}).model_copy(update={"session_recall_any": {1: None}}),
    ]
    s = scores(with_sessions, ks=(10,))
    assert (s.session_recall_any, s.session_recall_all, s.chance) == ({1: 0.5}, {1: 0.0}, {"session_recall_any": {1: 0.5}})


def test_session_recall_counts_each_session_once_in_the_order_first_retrieved() -> None:
    # ranked memories' sources -> sessions in order: D1, D2 (D1 again is not new), D3, D4
    ranked = [("D1:3",), ("D2:1", "D1:4"), ("D1:9",), ("D3:2",), (), ("D4:1",)]
    assert session_recall(ranked, ["D2:5", "D4:1"], 1) == (0.0, 0.0)
    assert session_recall(ranked, ["D2:5", "D4:1"], 2) == (1.0, 0.0)  # D2 among {D1, D2}; D4 is not
    assert session_recall(ranked, ["D2:5", "D4:1"], 4) == (1.0, 1.0)
    assert session_recall(ranked, ["D8:6; D3:17"], 3) == (1.0, 0.0)  # two ids in one evidence entry
    assert session_recall(ranked, [], 5) == (None, None)
    assert session_of("D12:7") == "D12"


def test_chance_recall_by_hand() -> None:
    # 4 sessions, 1 evidence session, k=2: any = 1 - C(3,2)/C(4,2) = 1 - 3/6; all = the same
    assert chance_session_recall(4, 1, 2) == pytest.approx((0.5, 0.5))
    # 4 sessions, 2 evidence, k=2: any = 1 - C(2,2)/C(4,2) = 5/6; all = C(2,0)/C(4,2) = 1/6
    assert chance_session_recall(4, 2, 2) == pytest.approx((5 / 6, 1 / 6))
    assert chance_session_recall(4, 3, 2)[1] == 0.0  # fewer than the evidence sessions: never all
    assert chance_session_recall(4, 2, 10) == (1.0, 1.0)  # k past the sessions: every one
    assert chance_recall(200, 10) == 0.05 and chance_recall(5, 10) == 1.0
    with pytest.raises(ValueError):
        chance_session_recall(3, 0, 1)


def test_category_5_is_right_when_abstained_and_abstention_is_scored_both_ways() -> None:
    from memsdk.datasets.locomo import LocomoQA
    from memsdk.eval import EvalConfig
    from memsdk.eval.results import ConversationResult, IngestStats, summarize
    from memsdk.eval.runner import Evaluator

    score = Evaluator.__new__(Evaluator)._score  # a pure method: no run needed
    trap = LocomoQA("What did Caroline paint for Melanie?", "a sunset", ("D2:3",), 5)
    answerable = LocomoQA("Where did Melanie go?", "the beach", ("D1:1",), 4)
    questions = [
        score(trap, "unknown", abstained=True, latency_s=0.0),
        score(trap, "a sunset", abstained=False, latency_s=0.0),  # the trap answered: wrong, whatever its F1
        score(answerable, "the beach", abstained=False, latency_s=0.0),
        score(answerable, "unknown", abstained=True, latency_s=0.0),  # an abstention where memory holds it
    ]
    assert [q.f1 for q in questions] == [1.0, 0.0, 1.0, 0.0]
    conversation = ConversationResult(sample_id="c", fingerprint="f", turns=1, memories=0, ingest=IngestStats(), questions=questions, wall_s=0.0)
    summary = summarize([conversation], EvalConfig().recall_ks)
    assert summary.abstention is not None and summary.answerable is not None
    # 1 of 2 category 5 questions abstained on; 1 of 2 abstentions was on category 5
    assert (summary.abstention.recall, summary.abstention.precision) == (0.5, 0.5)
    assert summary.answerable.n == 2 and summary.answerable.f1 == 0.5
    assert summarize([conversation.model_copy(update={"questions": questions[2:]})], (10,)).abstention is None
