"""PPO with a value head (`recipes.learners.ValueLearner`) on the tiny random Llama of `_tiny.py`: it learns
the constructed op task through the shared loop (the PPO config picks the learner), its critic follows the rewards, the critic is
checkpointed and resumed exactly, and the advantages the loss sees are GAE on the head's values."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from memsdk_training.checkpoint import load_checkpoint
from memsdk_training.cli import build_recipe, main
from memsdk_training.recipes.manager import ManagerRecipe
from memsdk_training.recipes import (
    GroupLearner,
    LoRASettings,
    ManagerGRPOConfig,
    ManagerPPOConfig,
    LoRAModel,
    RecipeData,
    Recipe,
    ValueLearner,
    learners,
    read_metrics,
)
from memsdk_training.recipes.learners import (
    Reply,
    ValueHead,
    ppo_targets,
    value_ppo_update,
)
from pydantic import ValidationError
from safetensors.torch import load_file

from memsdk.registry import PolicyRegistry

from ._tiny import OpChoiceEnv, make_format_model, mean_of as _mean, op_states, run_recipe
from .test_cli_and_recipes import CONFIGS, _tiny_config


class OpPPORecipe(Recipe):
    """The shared loop on the synthetic op task; its PPO config makes the learner PPO with a value head."""

    def _setup_data(self, policy, rollouts):  # type: ignore[no-untyped-def]
        return RecipeData(OpChoiceEnv(rollouts.backend), op_states(8, seed=0), op_states(8, seed=1))


def _config(model_dir: Path, out: Path, **overrides: object) -> ManagerPPOConfig:
    base = {
        "model_path": str(model_dir), "output_dir": str(out), "progress": False, "seed": 0, "num_threads": 1,
        "lora": LoRASettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head")),
        # 4 replies to each of 16 states a step: no group statistics, the critic is the baseline
        "lr": 5e-3, "value_lr": 3e-3, "ppo_epochs": 2, "group_size": 4, "prompts_per_step": 16, "max_tokens": 1,
        "micro_batch_size": 64, "kl_coef": 0.001, "steps": 30, "checkpoint_every": 1000,
    }  # fmt: skip
    return ManagerPPOConfig.model_validate({**base, **overrides})


def _run(config: ManagerPPOConfig) -> list[dict]:
    return run_recipe(OpPPORecipe, config)


def test_ppo_with_a_value_head_learns_the_right_op_and_its_critic_follows_the_reward(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows = _run(_config(tiny_model_dir, tmp_path / "ppo"))
    start, end = _mean(rows[:3]), _mean(rows[-5:])
    values, value_loss = _mean(rows[-5:], "value_mean"), _mean(rows[-5:], "value_loss")
    print(f"\nPPO reward {start:.2f} -> {end:.2f}; V {rows[0]['value_mean']:.2f} -> {values:.2f}; value loss at the end {value_loss:.3f}")
    assert start < 0.3
    assert end >= 0.8
    # the head starts at V = 0 and must have gone at least halfway to the reward it now sees
    assert rows[0]["value_mean"] == 0.0 and values >= 0.5 * end
    # an untrained (V = 0) critic would lose 1/2 E[R^2] = 1/2 mean R on these binary rewards
    assert value_loss < 0.25 * 0.5 * end
    # nothing is dropped: every reply with a token is a row, uniform groups included (a reply here
    # is one token, or none when <pad> was sampled, so 64 * response_length replies had one)
    assert all(r["rows"] == round(64 * r["response_length"]) for r in rows)
    assert any(r["zero_variance_fraction"] > 0 for r in rows)
    logged = read_metrics(tmp_path / "ppo" / "metrics.jsonl")[-1]
    assert {"value_loss", "value_clip_fraction", "explained_variance", "value_mean", "kl", "entropy"} <= set(logged)
    assert logged["eval_reward"] >= 0.75
    assert (tmp_path / "ppo" / "curves.png").stat().st_size > 1000


def test_value_head_is_checkpointed_and_a_resumed_run_continues_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    small = {"prompts_per_step": 4, "checkpoint_every": 2}  # exactness needs no big batches
    straight = _run(_config(tiny_model_dir, tmp_path / "a", steps=4, **small))
    _run(_config(tiny_model_dir, tmp_path / "b", steps=2, **small))
    resumed = OpPPORecipe(_config(tiny_model_dir, tmp_path / "b", steps=4, **small))
    resumed.setup()
    assert isinstance(resumed.learner, ValueLearner)  # the PPO config picked it
    assert resumed.step == 2 and resumed.learner.value_head.weight.detach().abs().sum() > 0  # the trained head, not a fresh zero one
    tail = resumed.train()
    assert [r["step"] for r in tail] == [3, 4]
    for key in ("reward_mean", "value_mean", "value_loss", "loss"):
        assert [r[key] for r in tail] == [r[key] for r in straight[2:]], key
    finished = OpPPORecipe(_config(tiny_model_dir, tmp_path / "a", steps=4))
    finished.setup()
    for name, weight in resumed.policy.adapter_state().items():
        torch.testing.assert_close(weight, finished.policy.adapter_state()[name], rtol=1e-5, atol=1e-6)
    head = finished.learner.value_head
    torch.testing.assert_close(resumed.learner.value_head.state_dict(), head.state_dict(), rtol=1e-5, atol=1e-6)
    # the optimizer steps the LoRA and the head, the head at its own rate
    assert [g["lr"] for g in finished.optimizer.param_groups] == [5e-3, 3e-3]
    assert finished.optimizer.param_groups[1]["params"] == list(head.parameters())
    # the published adapter is the LoRA alone; the head lives in trainer.pt
    last = tmp_path / "a" / "checkpoints" / "last"
    assert not [k for k in load_file(str(last / "adapter" / "adapter_model.safetensors")) if "value" in k]
    with pytest.raises(ValueError, match="critic"):
        load_checkpoint(last, policy=finished.policy, modules={"critic": ValueHead(32)})


def test_the_loss_sees_gae_of_the_value_head_whitened_over_the_step(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the pure function, by hand: V_old = [[0.2, 0.5], [0.4, -]], R = [1, 0], gamma 1, lambda 0.5
    #   row 0: delta_1 = 1 - 0.5 = 0.5, A_1 = 0.5;  delta_0 = 0.5 - 0.2 = 0.3, A_0 = 0.3 + 0.5 * 0.5 = 0.55
    #   row 1: delta_0 = 0 - 0.4, A_0 = -0.4.   G = A + V = [[0.75, 1.0], [0.0, -]]
    #   whitened over [0.55, 0.5, -0.4]: mean 0.21667, population std 0.43653
    targets = ppo_targets(torch.tensor([1.0, 0.0]), torch.tensor([[0.2, 0.5], [0.4, 0.0]]), torch.tensor([[1, 1], [1, 0]]), gamma=1.0, lam=0.5)
    torch.testing.assert_close(targets.returns, torch.tensor([[0.75, 1.0], [0.0, 0.0]]))
    torch.testing.assert_close(targets.advantages, torch.tensor([[0.76360, 0.64906], [-1.41267, 0.0]]), atol=1e-4, rtol=0)

    # the recipe's update, on the tiny model with a random head (V differs per token): replies of
    # 3 and 1 tokens in separate micro-batches, so whitening must span both
    config = _config(tiny_model_dir, Path("unused"), micro_batch_size=1, ppo_epochs=1, gamma=0.9, lam=0.8)
    torch.manual_seed(0)
    policy = LoRAModel.from_config(config)
    head = ValueHead(policy.model.config.hidden_size)
    torch.nn.init.normal_(head.weight, std=0.5)
    optimizer = torch.optim.AdamW([*policy.trainable_parameters(), *head.parameters()], lr=1e-3)
    prompt = policy.render(OpChoiceEnv.messages(op_states(4)[0]))
    vocab = policy.tokenizer.get_vocab()
    replies = [Reply(prompt, (vocab["ADD"], vocab["alice"], vocab["<eos>"]), 1.0), Reply(prompt, (vocab["NOOP"],), 0.0)]
    with torch.no_grad():
        v = [head(policy.score([r.prompt], [r.completion], with_hidden=True).hidden)[0].tolist() for r in replies]  # type: ignore[arg-type]

    def reference(values: list[float], reward: float) -> list[float]:
        """A_t = sum_{l >= 0} (gamma lambda)^l delta_{t+l}, delta_t = r_t + gamma V_{t+1} - V_t, V = 0 after the end."""
        r = [0.0] * (len(values) - 1) + [reward]
        nxt = [*values[1:], 0.0]
        delta = [r[t] + 0.9 * nxt[t] - values[t] for t in range(len(values))]
        return [sum((0.9 * 0.8) ** l * delta[t + l] for l in range(len(values) - t)) for t in range(len(values))]

    raw = [reference(v[0], 1.0), reference(v[1], 0.0)]
    flat = torch.tensor(raw[0] + raw[1])
    expected = [(torch.tensor(a) - flat.mean()) / (flat.std(correction=0) + 1e-8) for a in raw]

    seen: list[torch.Tensor] = []
    original = learners.policy_loss

    def spy(new, old_logp, ref_logp, advantages, cfg):  # type: ignore[no-untyped-def]
        seen.append(advantages.detach().clone())
        return original(new, old_logp, ref_logp, advantages, cfg)

    monkeypatch.setattr(learners, "policy_loss", spy)
    _, critic = value_ppo_update(policy, head, optimizer, replies, config)
    assert [a.shape for a in seen] == [torch.Size([1, 3]), torch.Size([1, 1])]
    for got, want in zip(seen, expected):
        torch.testing.assert_close(got[0], want.float(), atol=1e-5, rtol=1e-5)
    assert critic["value_mean"] == pytest.approx(sum(v[0] + v[1]) / 4, abs=1e-6)


def test_hidden_states_are_the_columns_whose_logits_predict_each_token(tiny_model_dir: Path) -> None:
    policy = LoRAModel.from_config(_config(tiny_model_dir, Path("unused")))
    vocab = policy.tokenizer.get_vocab()
    prompt = policy.render(OpChoiceEnv.messages(op_states(4)[0]))
    scored = policy.score([prompt, prompt], [(vocab["ADD"], vocab["bob"]), (vocab["NOOP"],)], reference=True, with_logits=True, with_hidden=True)
    assert scored.hidden is not None and scored.logits is not None
    lm_head = policy.model.get_base_model().lm_head.base_layer  # the adapter is off in a reference pass
    torch.testing.assert_close(lm_head(scored.hidden) / policy.temperature, scored.logits, atol=1e-5, rtol=1e-5)


def test_shipped_ppo_config_builds_the_manager_ppo_recipe() -> None:
    recipe = build_recipe("manager-ppo", str(CONFIGS / "manager_ppo.yaml"), steps=2)
    assert isinstance(recipe, ManagerRecipe) and isinstance(recipe.config, ManagerPPOConfig) and recipe.config.steps == 2
    with pytest.raises(ValueError, match="baseline"):
        ManagerPPOConfig(drop_zero_variance=True)


def test_the_learner_field_picks_the_learner_and_value_needs_the_value_heads_settings(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``learner`` chooses, not the config's class, and a config file may name it; 'value' needs
    gamma & co., which only the PPO config has, and the PPO config has no group baseline to offer."""
    ppo = _config(tiny_model_dir, tmp_path)
    grpo = ManagerGRPOConfig(model_path=str(tiny_model_dir), num_threads=1, lora=ppo.lora)
    policy = LoRAModel.from_config(grpo)
    assert ppo.learner == "value" and type(learners.learner_for(ppo, policy)) is ValueLearner
    assert grpo.learner == "group" and type(learners.learner_for(grpo, policy)) is GroupLearner
    assert build_recipe("manager-ppo", str(CONFIGS / "manager_ppo.yaml")).config.learner == "value"
    assert build_recipe("manager", str(CONFIGS / "manager_grpo.yaml")).config.learner == "group"

    with pytest.raises(ValidationError) as refused:
        ManagerGRPOConfig(learner="value")
    [error] = refused.value.errors()
    assert error["loc"] == ("learner",) and "gamma, lam, vf_coef, value_clip, value_lr" in error["msg"] and "ManagerGRPOConfig" in error["msg"]
    with pytest.raises(ValidationError, match="learner"):
        ManagerPPOConfig(learner="group")
    stated = tmp_path / "grpo.json"
    stated.write_text('{"learner": "value"}')
    with pytest.raises(ValidationError, match="learner"):
        build_recipe("manager", str(stated))


@pytest.mark.locomo
def test_cli_trains_the_manager_with_ppo_one_step_and_publishes_the_lora_only(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    torch.set_num_threads(1)
    config = _tiny_config(tmp_path, make_format_model(tmp_path / "model"), max_train_states=2, max_val_states=2, publish={"registry_dir": str(registry), "version": "p1"})
    assert main(["train", "manager-ppo", "--config", str(config)]) == 0
    row = read_metrics(tmp_path / "run" / "metrics.jsonl")[0]
    assert {"value_loss", "explained_variance", "eval_valid_op_rate"} <= set(row)
    published = registry / "manager" / "p1"
    assert PolicyRegistry(registry).get("manager", "p1").version == "p1"
    assert sorted(p.name for p in published.iterdir() if p.suffix == ".safetensors") == ["adapter_model.safetensors"]
