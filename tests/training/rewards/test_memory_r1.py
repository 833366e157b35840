import pytest

from memsdk_training.rewards.memory_r1 import manager_reward


@pytest.mark.parametrize(
    ("qa_score", "valid", "format_weight", "expected"),
    [
        (0.5, True, 0.0, 0.5),  # the paper: no format term
        (0.5, True, 0.2, 0.7),
        (0.5, False, 0.2, 0.5),
        (0.0, True, 0.1, 0.1),  # a valid reply that changed no answer still earns w_fmt
    ],
)
def test_manager_reward_is_qa_plus_the_format_term(qa_score, valid, format_weight, expected):
    assert manager_reward(qa_score, valid, format_weight) == pytest.approx(expected, abs=1e-12)


def test_manager_reward_defaults_to_the_paper():
    assert manager_reward(0.25, True) == 0.25
