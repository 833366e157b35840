"""The whole gradient path, on a tiny random Llama: sampling -> log-probs -> GRPO advantages ->
PPO loss -> optimizer. The right op is fixed by construction (the memory's relation to the
fact), so a working path must learn it and a path with zeroed advantages must not."""

from __future__ import annotations

from pathlib import Path

import torch

from memsdk_training.recipes import RecipeData, read_metrics

from ._tiny import OpChoiceEnv, OpRecipe, ZeroAdvantageRecipe, mean_of as _mean, op_config as _config, op_states, run_recipe as _run


# Whether 30 steps learn all four ops depends on the seed and on the CPU's numerics: about
# half the seeds stall near 0.5 (two ops of four) by then (6 seeds: 2 reached 0.8; mean reward
# after 30 steps .64), and this seed reached .80+ on one machine and .73 on another. So the
# test asserts what holds whatever the numerics: the reward rises far above the start and
# above the zeroed-advantage control, which does not move.
LEARNING_SEED = 2


def test_grpo_learns_the_right_op_and_zeroed_advantages_do_not(tiny_model_dir: Path, tmp_path: Path) -> None:
    learned = _run(OpRecipe, _config(tiny_model_dir, tmp_path / "grpo", seed=LEARNING_SEED))
    frozen = _run(ZeroAdvantageRecipe, _config(tiny_model_dir, tmp_path / "zero", seed=LEARNING_SEED))
    start, end = _mean(learned[:3]), _mean(learned[-5:])
    print(f"\nGRPO reward {start:.2f} -> {end:.2f}; zeroed advantages {_mean(frozen[:3]):.2f} -> {_mean(frozen[-5:]):.2f}")
    assert start < 0.3  # a random model over ~30 words rarely says the right op
    assert end >= 0.4 and end - _mean(frozen[-5:]) >= 0.3  # learned: one op of four or more beyond chance
    assert _mean(frozen[-5:]) < 0.3
    # the same rollouts at step 1 (same seeds): the runs only part once the updates differ
    assert learned[0]["reward_mean"] == frozen[0]["reward_mean"]
    # what the loop must log every step, and what only a step that updated may log
    rows = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    for row in rows:
        for key in ("reward_mean", "reward_std", "zero_variance_fraction", "response_length", "parse_failure_rate", "updated"):
            assert key in row
        if row["updated"]:
            assert row["rows"] > 0 and row["zero_variance_fraction"] < 1.0
        else:  # every group had equal rewards: nothing was measured, so nothing is logged as measured
            assert row["rows"] == 0 and row["zero_variance_fraction"] == 1.0
            assert not {"kl", "entropy", "clip_fraction", "loss", "grad_norm"} & set(row)
    updated = [r for r in rows if r["updated"]]
    assert updated and all(r["kl"] >= 0 and r["entropy"] > 0 for r in updated)
    assert max(r["kl"] for r in updated) > 0  # the policy moved away from its reference
    assert rows[-1]["eval_reward"] >= 0.75
    assert (tmp_path / "grpo" / "curves.png").stat().st_size > 1000


class UniformEnv(OpChoiceEnv):
    """Every reply scores the same: no group carries a signal."""

    def reward(self, state, text):  # type: ignore[no-untyped-def]
        return 0.5


class UniformRecipe(OpRecipe):
    def _setup_data(self, policy, rollouts):  # type: ignore[no-untyped-def]
        return RecipeData(UniformEnv(rollouts.backend), op_states(8, seed=0), op_states(8, seed=1))


def test_a_step_with_no_signal_updates_nothing_and_says_so(tiny_model_dir: Path, tmp_path: Path) -> None:
    recipe = UniformRecipe(_config(tiny_model_dir, tmp_path / "uniform", steps=2))
    recipe.setup()
    try:
        before = {k: v.clone() for k, v in recipe.policy.adapter_state().items()}
        rows = recipe.train()
        after = recipe.policy.adapter_state()
    finally:
        recipe.cleanup()
    assert [r["updated"] for r in rows] == [False, False]
    for row in rows:  # nothing measured is logged as if it had been: no KL 0.0, no loss 0.0
        assert row["rows"] == 0 and row["zero_variance_fraction"] == 1.0
        assert not {"kl", "entropy", "clip_fraction", "dual_clip_fraction", "loss", "grad_norm"} & set(row)
    for name, weight in before.items():
        assert torch.equal(weight, after[name]), name
    assert read_metrics(tmp_path / "uniform" / "metrics.jsonl") == rows


def test_resume_continues_exactly_where_the_run_stopped(tiny_model_dir: Path, tmp_path: Path) -> None:
    straight = _run(OpRecipe, _config(tiny_model_dir, tmp_path / "a", steps=6, checkpoint_every=3))
    _run(OpRecipe, _config(tiny_model_dir, tmp_path / "b", steps=3, checkpoint_every=3))
    resumed = OpRecipe(_config(tiny_model_dir, tmp_path / "b", steps=6, checkpoint_every=3))
    resumed.setup()
    assert resumed.step == 3
    tail = resumed.train()
    assert [r["step"] for r in tail] == [4, 5, 6]
    assert [r["reward_mean"] for r in tail] == [r["reward_mean"] for r in straight[3:]]
    assert [r["step"] for r in read_metrics(tmp_path / "b" / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
    finished = OpRecipe(_config(tiny_model_dir, tmp_path / "a", steps=6))
    finished.setup()
    for name, weight in resumed.policy.adapter_state().items():
        torch.testing.assert_close(weight, finished.policy.adapter_state()[name], rtol=1e-5, atol=1e-6)
