import numpy as np
import pytest

from memsdk_training.rewards.deltamem import (
    DeltaMemConfig,
    deltamem_reward,
    keyword_coverage,
    match_deltas,
    soft_state_f1,
    state_deltas,
)

TARGET = ["likes jazz", "user moved to boston in march", "user has dog named buddy"]
PRED = ["likes jazz", "user relocated to boston in march", "user owns a cat"]
# Phi over (Delta_pred x Delta_target); rows: relocated..., owns a cat; cols: moved..., dog...
PHI = {
    ("user relocated to boston in march", "user moved to boston in march"): 0.9,
    ("user relocated to boston in march", "user has dog named buddy"): 0.1,
    ("user owns a cat", "user moved to boston in march"): 0.2,
    ("user owns a cat", "user has dog named buddy"): 0.4,
}


def table_similarity(pred, target):
    return np.array([[PHI.get((p, t), 0.0) for t in target] for p in pred])


def never_called(pred, target):
    raise AssertionError("similarity must not be called when a delta is empty")


def test_state_deltas_are_ordered_set_differences():
    deltas = state_deltas(PRED + ["likes jazz"], TARGET)
    assert deltas.pred == ("user relocated to boston in march", "user owns a cat")
    assert deltas.target == ("user moved to boston in march", "user has dog named buddy")


def test_threshold_excludes_the_low_similarity_pair():
    # tau = 0.5 keeps only (relocated, moved); its target has 6 keywords, pred covers 5
    result = soft_state_f1(PRED, TARGET, table_similarity, config=DeltaMemConfig(tau=0.5))
    assert result.matches == ((0, 0),)
    tp = 5 / 6
    assert result.precision == pytest.approx(tp / 2, abs=1e-6)
    assert result.recall == pytest.approx(tp / 2, abs=1e-6)
    assert result.f1 == pytest.approx(tp / 2, abs=1e-6)


def test_lower_threshold_admits_the_pair():
    # (owns a cat, has dog named buddy) now matches and covers 1 of 5 keywords ("user")
    result = soft_state_f1(PRED, TARGET, table_similarity, config=DeltaMemConfig(tau=0.3))
    assert result.matches == ((0, 0), (1, 1))
    assert result.f1 == pytest.approx((5 / 6 + 1 / 5) / 2, abs=1e-6)


def test_unintended_update_cannot_be_matched_but_still_counts_against_precision():
    result = soft_state_f1(
        PRED, TARGET, table_similarity, unintended_update={"user relocated to boston in march"}
    )
    assert result.matches == ()
    assert result.f1 == 0.0
    assert len(result.deltas.pred) == 2


def test_matching_is_optimal_not_greedy():
    # greedy would take (0, 0) = 0.9 and then nothing above tau; the optimum is 0.8 + 0.85
    phi = np.array([[0.9, 0.8], [0.85, 0.1]])
    assert match_deltas(phi, tau=0.5) == ((0, 1), (1, 0))


def test_forbidden_row_frees_its_column_for_another_row():
    phi = np.array([[0.9, 0.1], [0.6, 0.1]])
    assert match_deltas(phi, tau=0.5) == ((0, 0),)
    assert match_deltas(phi, tau=0.5, forbidden_rows=[0]) == ((1, 0),)


def test_match_deltas_empty_matrix():
    assert match_deltas(np.zeros((0, 3)), tau=0.5) == ()


def test_keyword_coverage():
    assert keyword_coverage("User moved to Boston", {"boston", "march"}) == pytest.approx(0.5, abs=1e-6)
    assert keyword_coverage("art", {"party"}) == 0.0
    assert keyword_coverage("anything", set()) == 0.0


def test_custom_keywords_drive_the_soft_true_positive():
    result = soft_state_f1(
        PRED, TARGET, table_similarity, keywords=lambda target: {"boston", "march", "moved"}
    )
    assert result.f1 == pytest.approx((2 / 3) / 2, abs=1e-6)


def test_equal_states_score_one_without_calling_similarity():
    assert soft_state_f1(["a fact", "b fact"], ["b fact", "a fact"], never_called).f1 == 1.0
    assert soft_state_f1([], [], never_called).f1 == 1.0


@pytest.mark.parametrize(("pred", "target"), [([], ["missing fact"]), (["extra fact"], []), (["x"], ["x", "y"])])
def test_one_sided_delta_scores_zero(pred, target):
    result = soft_state_f1(pred, target, never_called)
    assert (result.precision, result.recall, result.f1) == (0.0, 0.0, 0.0)


def test_deltamem_total_weights():
    assert deltamem_reward(1.0, 0.5, 5 / 12) == pytest.approx(0.1 + 0.05 + 0.8 * 5 / 12, abs=1e-12)
    custom = DeltaMemConfig(w_format=0.0, w_retrieval=0.0, w_state=1.0)
    assert deltamem_reward(1.0, 1.0, 0.25, custom) == 0.25


def test_negative_similarity_is_never_matched_even_below_a_negative_tau():
    assert match_deltas(np.array([[-0.2]]), tau=-1.0) == ()


def test_similarity_of_the_wrong_shape_is_rejected():
    with pytest.raises(ValueError):
        soft_state_f1(PRED, TARGET, lambda pred, target: np.zeros((1, 1)))
