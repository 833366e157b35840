import pytest

from memsdk_training.rewards.memory_r2 import SessionRewardConfig, compression_penalty, mean_qa_f1, session_reward


def test_compression_penalty_above_threshold():
    # alpha * (50 + 70) = 84 free tokens; (100 - 84) / 120
    assert compression_penalty(100, [50, 70], alpha=0.7) == pytest.approx(16 / 120, abs=1e-12)


@pytest.mark.parametrize("memory_tokens", [0, 80, 84])
def test_compression_penalty_is_zero_up_to_the_threshold(memory_tokens):
    assert compression_penalty(memory_tokens, [50, 70], alpha=0.7) == 0.0


def test_session_reward_defaults():
    assert session_reward(0.5, 100, [50, 70]) == pytest.approx(0.5 - 0.3 * 16 / 120, abs=1e-12)
    assert session_reward(0.5, 100, [50, 70]) == pytest.approx(0.46, abs=1e-12)


def test_session_reward_custom_config():
    config = SessionRewardConfig(alpha=0.5, lambda_comp=1.0)
    assert session_reward(0.5, 100, [50, 70], config) == pytest.approx(0.5 - 40 / 120, abs=1e-12)


def test_no_sessions_and_empty_memory_costs_nothing():
    assert compression_penalty(0, []) == 0.0
    assert session_reward(0.0, 0, []) == 0.0


def test_memory_without_any_session_is_an_error():
    with pytest.raises(ValueError):
        compression_penalty(5, [0])


def test_mean_qa_f1():
    # 2/3 (partial overlap) and 1.0 (exact)
    score = mean_qa_f1(["in the park with Buddy", "Paris"], ["Buddy park", "paris"])
    assert score == pytest.approx((2 / 3 + 1) / 2, abs=1e-12)


def test_mean_qa_f1_empty_and_mismatched():
    assert mean_qa_f1([], []) == 0.0
    with pytest.raises(ValueError):
        mean_qa_f1(["a"], [])
