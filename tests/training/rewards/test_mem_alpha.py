import pytest

from memsdk_training.rewards.mem_alpha import (
    MemAlphaConfig,
    compression_reward,
    content_validity,
    format_validity,
    mem_alpha_reward,
)


def test_format_validity_is_fraction_of_executed_calls():
    assert format_validity([True, False, True, True]) == 0.75


def test_format_validity_no_calls_is_zero():
    assert format_validity([]) == 0.0


@pytest.mark.parametrize(
    ("memory", "context", "expected"),
    [(30, 120, 0.75), (150, 100, -0.5), (0, 10, 1.0), (0, 0, 0.0)],
)
def test_compression_reward(memory, context, expected):
    assert compression_reward(memory, context) == pytest.approx(expected, abs=1e-12)


def test_content_validity_uses_the_judge_hook():
    calls = [{"op": "insert", "text": "likes jazz"}, {"op": "insert", "text": ""}]
    seen = []

    def judge(call):
        seen.append(call)
        return bool(call["text"])

    assert content_validity(calls, judge) == 0.5
    assert seen == calls
    assert content_validity([], judge) == 0.0


def test_mem_alpha_reward_weights():
    # R1 + R2 + 0.05 R3 + 0.1 R4
    assert mem_alpha_reward(0.5, 0.75, 0.75, 0.5) == pytest.approx(0.5 + 0.75 + 0.0375 + 0.05, abs=1e-12)
    custom = MemAlphaConfig(w3=1.0, w4=0.0)
    assert mem_alpha_reward(0.5, 0.75, 0.75, 0.5, custom) == pytest.approx(2.0, abs=1e-12)
