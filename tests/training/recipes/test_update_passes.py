"""The update runs only the no-grad passes whose result can matter (TRL's rule): no pi_old pass
with one epoch (the weights have not moved when the loss is taken), no reference pass when
kl_coef is 0. Skipping them leaves the step's weights exactly as computing them would."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memsdk_training.recipes import LoRASettings, ManagerGRPOConfig, LoRAModel, Row, ppo_update, update_metrics

from ._tiny import OpChoiceEnv, op_states

LORA = LoRASettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"))


def run_update(tiny_model_dir: Path, explicit_old: bool, **settings: object) -> tuple[list[tuple[bool, bool]], dict[str, torch.Tensor], dict]:
    """One ppo_update on fixed rows; the (reference, with_logits) of every score call, the new weights, the stats."""
    torch.manual_seed(0)
    config = ManagerGRPOConfig(model_path=str(tiny_model_dir), num_threads=1, lora=LORA, lr=1e-2, micro_batch_size=2, **settings)
    policy = LoRAModel.from_config(config)
    vocab = policy.tokenizer.get_vocab()
    prompt = policy.render(OpChoiceEnv.messages(op_states(4)[0]))
    rows = [Row(prompt, (vocab["ADD"], vocab["alice"]), 1.0), Row(prompt, (vocab["NOOP"],), -1.0), Row(prompt, (vocab["UPDATE"],), 0.5)]
    calls: list[tuple[bool, bool]] = []
    score = policy.score

    def counting(prompts, completions, *, reference=False, with_logits=False, **kw):  # type: ignore[no-untyped-def]
        calls.append((reference, with_logits))
        return score(prompts, completions, reference=reference, with_logits=with_logits, **kw)

    policy.score = counting  # type: ignore[method-assign]
    if explicit_old:  # the old behaviour: a separate pi_old pass even for one epoch
        from memsdk_training.recipes import update

        original = update.score_old

        def always_old(*args, old, **kw):  # type: ignore[no-untyped-def]
            return original(*args, old=True, **kw)

        update.score_old = always_old
        try:
            stats = ppo_update(policy, torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2), rows, config)
        finally:
            update.score_old = original
    else:
        stats = ppo_update(policy, torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2), rows, config)
    return calls, {k: v.clone() for k, v in policy.adapter_state().items()}, update_metrics(stats)


@pytest.mark.parametrize("kl_coef", [0.001, 0.0])
def test_one_epoch_skips_the_old_pass_and_kl_zero_skips_the_reference_pass(tiny_model_dir: Path, kl_coef: float) -> None:
    calls, weights, metrics = run_update(tiny_model_dir, explicit_old=False, ppo_epochs=1, kl_coef=kl_coef)
    no_grad = [c for c in calls if not c[1]]
    assert no_grad == ([(True, False)] * 2 if kl_coef else [])  # 2 micro-batches: only their reference passes, if any
    assert ("kl" in metrics) == (kl_coef > 0) and metrics["updated"] is True
    _, explicit, _ = run_update(tiny_model_dir, explicit_old=True, ppo_epochs=1, kl_coef=kl_coef)
    for name, w in explicit.items():  # pi_old from its own pass or from the same forward: the same step
        torch.testing.assert_close(weights[name], w, rtol=1e-5, atol=1e-6)


def test_two_epochs_still_score_pi_old_once_before_the_first(tiny_model_dir: Path) -> None:
    calls, _, _ = run_update(tiny_model_dir, explicit_old=False, ppo_epochs=2, kl_coef=0.001)
    assert [c for c in calls if not c[1]] == [(False, False), (True, False)] * 2
