import pytest
import torch

from memsdk_training.losses.aggregation import aggregate, row_step_ids, step_means

PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
STEPS = torch.tensor([[0, 0, 1, -1], [2, -1, -1, -1]])  # ids of masked tokens are ignored


def test_token_mean():
    assert aggregate(PER_TOKEN, MASK, "token-mean").item() == pytest.approx((1 + 2 + 3 + 4) / 4, abs=1e-6)


def test_seq_mean_token_mean():
    assert aggregate(PER_TOKEN, MASK, "seq-mean-token-mean").item() == pytest.approx((2 + 4) / 2, abs=1e-6)


def test_step_mean():
    # steps: {1, 2} -> 1.5, {3} -> 3, {4} -> 4
    assert aggregate(PER_TOKEN, MASK, "step-mean", STEPS).item() == pytest.approx((1.5 + 3 + 4) / 3, abs=1e-6)


def test_step_means_broadcast():
    out = step_means(PER_TOKEN, STEPS, MASK)
    assert out.per_step.tolist() == [1.5, 3.0, 4.0]
    assert out.per_token.tolist() == [[1.5, 1.5, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]]


def test_rows_without_tokens_do_not_count_in_seq_mean():
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])
    assert aggregate(PER_TOKEN, mask, "seq-mean-token-mean").item() == pytest.approx(2.0, abs=1e-6)


def test_sequence_steps_equal_seq_mean():
    assert aggregate(PER_TOKEN, MASK, "step-mean", row_step_ids(MASK)).item() == pytest.approx(3.0, abs=1e-6)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "step-mean"])
def test_empty_mask_gives_zero_with_a_graph(mode):
    x = torch.ones(2, 3, requires_grad=True)
    out = aggregate(x, torch.zeros(2, 3), mode, torch.zeros(2, 3, dtype=torch.long))
    assert out.item() == 0.0
    out.backward()
    assert x.grad is not None and not torch.isnan(x.grad).any()


def test_step_mean_needs_step_ids_and_modes_are_checked():
    with pytest.raises(ValueError):
        aggregate(PER_TOKEN, MASK, "step-mean")
    with pytest.raises(ValueError):
        aggregate(PER_TOKEN, MASK, "sum")  # type: ignore[arg-type]
