"""The recipes' shared typed config (pydantic), loaded from YAML or JSON.

`RecipeConfig` holds what every on-policy recipe needs (model, LoRA, sampling, loss,
schedule, device); each recipe's own config derives from it and sits beside the recipe
(`manager.ManagerGRPOConfig` and `ManagerPPOConfig`, `answerer.AnswererGRPOConfig`,
`logo_grpo.LogoGRPOConfig`, `writer.WriterGRPOConfig`, `memagent.MemAgentDAPOConfig`,
`deltamem.DeltaMemGRPOConfig`), so the shared modules (loop, learners, update, policy,
rollouts) read `RecipeConfig` alone and never import a recipe.

Every field has a default that runs on a CPU; a config file only names what it changes
(``training/configs/*.yaml``). Unknown keys are errors, so a typo never silently trains
with a default. The defaults follow the papers where they say something:

    Memory-R1 (manager / answerer GRPO)   group size 8, clip 0.2, KL k3, EM reward
    Memory-R2 (LoGo-GRPO)                 clip 0.2, dual clip c = 3, log-ratio cap 3, KL 0.001
                                          (k3), entropy 0.001, lr 2e-6, 2 PPO epochs,
                                          step-level ratio, curriculum 8 -> 16 -> 32 sessions
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..losses import AggregationMode, KLEstimator, PPOClipConfig, RatioLevel

__all__ = ["LoRASettings", "PublishSettings", "RecipeConfig", "ValueSettings", "load_config"]


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LoRASettings(_Config):
    rank: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="0 keeps rollout and scoring forward passes identical.")
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


class PublishSettings(_Config):
    """Where the final (best-validation) adapter goes when training ends."""

    registry_dir: str
    version: str
    promote: bool = Field(False, description="Let clients that watch the registry switch without being asked.")


class ValueSettings(NamedTuple):
    """What PPO with a value head (`learners.ValueLearner`) reads beside `RecipeConfig`: a
    config that may name ``learner: value`` has a field of each name (`manager.ManagerPPOConfig`)."""

    gamma: float
    lam: float
    vf_coef: float
    value_clip: float | None
    value_lr: float | None


class RecipeConfig(_Config):
    """What every GRPO-family recipe needs: model, LoRA, sampling, loss, schedule, device."""

    # -- model ---------------------------------------------------------------------------------
    model_path: str | None = Field(None, description="A transformers model folder; None: the converted SmolLM2-135M.")
    base_model: str = Field("smollm2", description="The served base model name written into the manifest.")
    lora: LoRASettings = LoRASettings()
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="The weights' dtype: bfloat16 halves a GPU run's memory (the LoRA and the losses stay float32-safe: log-probs are taken in float32)."
    )
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in the backward pass instead of keeping them: less memory for long rollouts, about a third more compute."
    )
    num_threads: int | None = Field(None, description="torch CPU threads; None leaves torch's default.")
    # -- sampling (the rollouts) ---------------------------------------------------------------
    group_size: int = Field(8, ge=2, description="n rollouts per prompt: a GRPO group.")
    prompts_per_step: int = Field(2, ge=1, description="Groups sampled per optimisation step.")
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(96, ge=1)
    rollout_backend: Literal["in-process", "vllm"] = "in-process"
    vllm_base_url: str | None = Field(None, description="rollout_backend 'vllm': a server started with --enable-lora.")
    vllm_base_urls: list[str] = Field(
        default_factory=list, description="rollout_backend 'vllm': several such servers (replicas); requests are spread across them and every update reloads the adapter on each."
    )
    # -- loss ----------------------------------------------------------------------------------
    learner: Literal["group", "value"] = Field(
        "group", description="The loop's learner (`learners.learner_for`): 'group' is GRPO's group baseline, 'value' PPO with a "
        "value head, which only a config with the value head's settings (`ValueSettings`: ManagerPPOConfig) may name.",
    )
    lr: float = Field(1e-5, gt=0.0)
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    ppo_epochs: int = Field(1, ge=1)
    micro_batch_size: int = Field(8, ge=1, description="Rows per forward pass when scoring; gradients accumulate.")
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dual_clip_c: float | None = None
    log_ratio_cap: float | None = 3.0
    ratio_level: RatioLevel = "token"
    aggregation: AggregationMode = "seq-mean-token-mean"
    kl_coef: float = Field(0.001, ge=0.0)
    kl_estimator: KLEstimator = "k3"
    entropy_coef: float = Field(0.0, ge=0.0)
    scale_by_std: bool = Field(True, description="GRPO (True) or Dr.GRPO (False, no std division).")
    drop_zero_variance: bool = Field(True, description="DAPO dynamic sampling: groups with equal rewards carry no signal.")
    # -- supervised warm start (`recipes.warm_start`), once, before RL ---------------------------
    warm_start_steps: int = Field(
        0, ge=0, description="SFT steps on the recipe's teacher replies before RL (0: none; the manager: the heuristic "
        "manager's valid replies, the answerer: the gold). A small model's samples rarely score, so GRPO groups score "
        "alike until it has seen the format.",
    )
    warm_start_lr: float = Field(1e-4, gt=0.0, description="The warm start's own AdamW rate (RL's optimizer state is left untouched).")
    warm_start_batch_size: int = Field(4, ge=1, description="Teacher examples per warm-start step.")
    # -- schedule and output ----------------------------------------------------------------------
    steps: int = Field(20, ge=0)
    seed: int = 0
    eval_every: int = Field(0, ge=0, description="0: evaluate only before and after training.")
    checkpoint_every: int = Field(10, ge=1)
    output_dir: str = "build/train"
    progress: bool = True
    publish: PublishSettings | None = None

    @field_validator("learner")
    @classmethod
    def _value_learner_needs_its_settings(cls, learner: str) -> str:
        # a YAML file may name the learner, but gamma & co. exist only on a PPO config: refused
        # here, the error names the field instead of the value learner failing at setup
        missing = [name for name in ValueSettings._fields if name not in cls.model_fields]
        if learner == "value" and missing:
            raise ValueError(
                f"'value' (PPO with a value head) needs {', '.join(missing)}, which {cls.__name__} does not have: "
                "use a PPO config (ManagerPPOConfig, `train manager-ppo`)"
            )
        return learner

    @model_validator(mode="after")
    def _vllm_needs_url(self) -> "RecipeConfig":
        if self.rollout_backend == "vllm" and not self.rollout_servers:
            raise ValueError("rollout_backend 'vllm' needs vllm_base_url or vllm_base_urls")
        return self

    @model_validator(mode="after")
    def _checkpointing_without_dropout(self) -> "RecipeConfig":
        # checkpointed layers only recompute in train mode, where LoRA dropout would make the
        # scored policy differ from the sampled one
        if self.gradient_checkpointing and self.lora.dropout:
            raise ValueError("gradient_checkpointing needs lora.dropout 0")
        return self

    @property
    def rollout_servers(self) -> list[str]:
        """Every vLLM base URL the rollouts may use, each once, in the order given."""
        return list(dict.fromkeys([*([self.vllm_base_url] if self.vllm_base_url else []), *self.vllm_base_urls]))

    def clip(self) -> PPOClipConfig:
        return PPOClipConfig(self.clip_eps_low, self.clip_eps_high, self.dual_clip_c, self.log_ratio_cap, self.ratio_level, self.aggregation)

    def value_settings(self) -> ValueSettings:
        """The value head's settings, from the fields of those names (``learner: value`` ensures they exist)."""
        return ValueSettings._make(getattr(self, name) for name in ValueSettings._fields)


C = TypeVar("C", bound=RecipeConfig)


def load_config(path: str | os.PathLike[str], cls: type[C], **overrides: object) -> C:
    """Read a YAML (.yaml/.yml) or JSON file into ``cls``; ``overrides`` win over the file."""
    text = Path(path).read_text()
    if str(path).endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    return cls.model_validate({**data, **{k: v for k, v in overrides.items() if v is not None}})
