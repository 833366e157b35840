import pytest

from memsdk_training.rewards.memagent import coverage_reward, equivalence_reward


def test_coverage_counts_each_gold_found():
    score = coverage_reward("The answers are Paris, Rome and Berlin", ["Paris", "Rome", "Madrid"])
    assert score == pytest.approx(2 / 3, abs=1e-12)


def test_coverage_matches_whole_tokens_only():
    assert coverage_reward("100 apples", ["10"]) == 0.0
    assert coverage_reward("a category", ["cat"]) == 0.0


def test_coverage_multi_word_gold_must_be_contiguous():
    assert coverage_reward("I love New York city", ["new york"]) == 1.0
    assert coverage_reward("New jersey, York", ["new york"]) == 0.0


def test_coverage_deduplicates_golds_after_normalisation():
    assert coverage_reward("Paris", ["Paris", "paris.", "the Paris"]) == 1.0


def test_coverage_empty_golds():
    assert coverage_reward("anything", []) == 0.0
    assert coverage_reward("anything", ["the", ""]) == 0.0


def test_equivalence_reward():
    assert equivalence_reward("the Paris", ["Rome", "paris"]) == 1.0
    assert equivalence_reward("Paris France", ["Rome", "paris"]) == 0.0
    assert equivalence_reward("Paris", []) == 0.0
