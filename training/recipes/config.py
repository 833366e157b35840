"""Typed recipe configs: one pydantic model per recipe, loaded from YAML or JSON.

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
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..losses import AggregationMode, KLEstimator, PPOClipConfig, RatioLevel

__all__ = [
    "LoRASettings",
    "PublishSettings",
    "RecipeConfig",
    "ManagerGRPOConfig",
    "ManagerPPOConfig",
    "AnswererGRPOConfig",
    "LogoGRPOConfig",
    "WriterGRPOConfig",
    "DeltaMemGRPOConfig",
    "MemAgentDAPOConfig",
    "load_config",
]


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


class ManagerGRPOConfig(RecipeConfig):
    """Memory-R1's manager: LoCoMo per-turn states, reward = EM (or F1) of a frozen answerer."""

    metric: Literal["em", "f1"] = "em"
    format_reward: float = Field(
        0.0, ge=0.0,
        description="Added when a reply parses and its ops pass the guard and the bank (0: the paper's EM/F1 only). "
        "A small model whose replies never parse gets equal rewards in every group, hence no signal, without it.",
    )
    answerer: Literal["extractive", "base-llm"] = Field(
        "extractive", description="The frozen answer agent: the extractive heuristic, or the base model (adapter off)."
    )
    embedder: Literal["minilm", "hash"] = "minilm"
    related_k: int = Field(5, ge=1)
    answer_k: int = Field(60, ge=1)
    qa_per_group: int | None = Field(2, description="Questions judging a group, drawn once per group.")
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_states: int | None = 32
    max_val_states: int | None = 8
    max_tokens: int = 96
    states: Literal["locomo", "manage"] = Field(
        "locomo", description="LoCoMo's turns judged by the answerer, or the management benchmark's turns judged by its gold state "
        "(`env.manage`: the reward is the share of the gold state that holds; the warm start teaches the gold ops).",
    )
    manage_scenarios: tuple[int, int] = Field((120, 40), description="Train and val scenarios of the management benchmark, when states='manage'.")
    prompt_version: str | None = Field(None, description="The manager prompt trained and published with (None: the role's default; 'v4' lets an ADD name what it replaces).")


class ManagerPPOConfig(ManagerGRPOConfig):
    """Memory-R1's manager with PPO: a value head on the policy's last hidden state is the baseline.

    Advantages are GAE over the reply's tokens with the reward on its last token, so no group
    statistics are needed: ``group_size`` may be 1, and no group is ever dropped
    (``drop_zero_variance`` and ``scale_by_std`` do not apply).
    """

    group_size: int = Field(4, ge=1, description="Replies per state: more rows from one state, not a baseline.")
    drop_zero_variance: bool = Field(False, description="Must stay False: the critic, not the group, is the baseline.")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="GAE discount over the reply's tokens.")
    lam: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda: 1 is Monte Carlo returns, 0 is one-step TD.")
    vf_coef: float = Field(0.1, ge=0.0, description="Weight of the value loss in the shared-backbone loss.")
    value_clip: float | None = Field(0.2, gt=0.0, description="Clip of V around the values the advantages used; None: unclipped.")
    value_lr: float | None = Field(None, gt=0.0, description="The value head's learning rate; None: lr.")

    @model_validator(mode="after")
    def _no_group_dropping(self) -> ManagerPPOConfig:
        if self.drop_zero_variance:
            raise ValueError("PPO does not drop zero-variance groups: the value head is the baseline")
        return self


class AnswererGRPOConfig(RecipeConfig):
    """Memory-R1's answer agent: (question, top-k memories, gold) with EM or F1."""

    metric: Literal["em", "f1"] = "f1"
    embedder: Literal["minilm", "hash"] = "minilm"
    answer_k: int = Field(60, ge=1, description="Memories shown per question (Memory-R1: 60).")
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_questions: int | None = 64
    max_val_questions: int | None = 16
    max_tokens: int = 48
    manager: Literal["heuristic", "pairs"] = Field("heuristic", description="The manager (no LLM) the states' banks are built with; 'pairs': the default's, whose retired facts the answerer sees marked.")
    manage_train_scenarios: int = Field(0, ge=0, description="Management benchmark train scenarios whose current- and previous-state questions join the training states.")
    manage_val_scenarios: int = Field(0, ge=0, description="Management benchmark val scenarios whose questions join validation (at most max_val_questions of them).")


class LogoGRPOConfig(RecipeConfig):
    """Memory-R2: one backbone for extractor + manager, LoGo-GRPO over session episodes."""

    p_local: float = Field(0.5, ge=0.0, le=1.0, description="Per session, the chance of a local branch.")
    rerolls: int = Field(4, ge=2, description="m re-rolls from the anchor state per local group.")
    curriculum: tuple[int, ...] = Field((8, 16, 32), description="Sessions per episode, stage by stage.")
    chunk_turns: int = Field(4, ge=1)
    related_k: int = Field(5, ge=1)
    answer_k: int = Field(60, ge=1)
    qa_per_session: int | None = 2
    alpha: float = 0.7
    lambda_comp: float = 0.3
    embedder: Literal["minilm", "hash"] = "minilm"
    answerer: Literal["extractive", "base-llm"] = "extractive"
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    # Memory-R2's public settings
    group_size: int = 4
    prompts_per_step: int = 1
    lr: float = 2e-6
    ppo_epochs: int = 2
    dual_clip_c: float | None = 3.0
    ratio_level: RatioLevel = "step"
    aggregation: AggregationMode = "step-mean"
    entropy_coef: float = 0.001
    max_tokens: int = 96


class WriterGRPOConfig(RecipeConfig):
    """Mem-alpha's writer: GRPO without the KL term over windows of LoCoMo sessions, chunked;
    R_t = R1 + R2_t + w3 * R3 + w4 * R4_t (`env.writer_env`)."""

    kl_coef: float = Field(0.0, ge=0.0, description="Mem-alpha removes the KL term to let the writer explore; 0 also skips the reference pass.")
    w3: float = Field(0.05, description="Weight of the compression reward R3 (Mem-alpha's code: 0.05).")
    w4: float = Field(0.1, description="Weight of the content-validity reward R4 (Mem-alpha's code: 0.1).")
    metric: Literal["em", "f1"] = Field("f1", description="R1's per-question score.")
    answerer: Literal["extractive", "base-llm"] = "extractive"
    embedder: Literal["minilm", "hash"] = "minilm"
    judge: Literal["grounded", "llm"] = Field("grounded", description="R4's judge: the grounding rule, or any OpenAI-compatible model at judge_url.")
    judge_url: str | None = None
    judge_model: str | None = None
    chunk_turns: int = Field(4, ge=1, description="Turns per write step (one writer call per chunk).")
    sessions_per_sample: int = Field(1, ge=1, description="Consecutive LoCoMo sessions in one sample (one rollout).")
    related_k: int = Field(5, ge=1, description="Semantic memories shown per step, beside the core memory.")
    answer_k: int = Field(30, ge=1, description="Memories retrieved per question for R1.")
    qa_per_sample: int | None = Field(4, description="Questions judging a group, drawn once per group.")
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_samples: int | None = 8
    max_val_samples: int | None = 2
    group_size: int = Field(4, ge=2, description="Rollouts per sample: each write step's group.")
    prompts_per_step: int = Field(1, ge=1, description="Samples per optimisation step.")
    max_tokens: int = 256

    @model_validator(mode="after")
    def _llm_judge_needs_url(self) -> "WriterGRPOConfig":
        if self.judge == "llm" and not self.judge_url:
            raise ValueError("judge 'llm' needs judge_url (any OpenAI-compatible server)")
        return self


class MemAgentDAPOConfig(RecipeConfig):
    """MemAgent's reader with Multi-Conv DAPO over long-document QA samples cut from LoCoMo
    (`recipes.memagent`): one advantage per rollout, R - mean R (Dr.GRPO: no std), shared by
    every token of every conversation; token-mean loss; asymmetric clip; uniform groups redrawn."""

    clip_eps_low: float = 0.2
    clip_eps_high: float = Field(0.28, description="DAPO's clip-higher: more room for a rising token's probability.")
    aggregation: AggregationMode = Field("token-mean", description="Every token of every conversation weighs the same (Multi-Conv DAPO).")
    scale_by_std: bool = Field(False, description="Dr.GRPO, as MemAgent: A_i = R_i - mean R.")
    drop_zero_variance: bool = True
    kl_coef: float = Field(0.001, ge=0.0, description="The seed's Multi-Conv DAPO objective keeps beta * KL(pi || pi_ref) (k3); 0 drops it and its reference pass.")
    max_redraws: int = Field(2, ge=0, description="Dynamic sampling: a group whose rewards are all equal is drawn again with fresh seeds, at most this often.")
    answerer: Literal["policy", "extractive", "base-llm"] = Field(
        "policy", description="Who answers from the final memory: the policy itself (MemAgent; the answer call is trained too), "
        "or a frozen answerer (the extractive heuristic, the base model with the adapter off; then only the reader is trained).",
    )
    budget_tokens: int = Field(64, ge=16, le=500, description="The memory's budget (client.read's budget_tokens). An answer is shown "
                               "the first 300 characters of a memory (~75 tokens), so a larger memory is cut when it is used.")
    chunk_tokens: int = Field(256, ge=32, description="Tokens per chunk (client.read's chunk_tokens): one reader conversation each.")
    sessions_per_sample: int = Field(1, ge=1, description="Consecutive LoCoMo sessions rendered as one document (one sample).")
    qa_per_sample: int | None = Field(2, description="Questions asked from the final memory, drawn once per group.")
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_samples: int | None = 8
    max_val_samples: int | None = 2
    group_size: int = Field(4, ge=2, description="Rollouts per sample: one group.")
    prompts_per_step: int = Field(1, ge=1, description="Samples per optimisation step.")
    max_tokens: int = Field(512, ge=1, description="A cap on each call's reply; the runtime's own budgets (the reader's from budget_tokens, the answerer's 64) apply below it.")

    @model_validator(mode="after")
    def _no_reader_registry_role(self) -> "MemAgentDAPOConfig":
        if self.publish is not None:
            raise ValueError("publish: the policy registry has no reader role yet; load the adapter from <output_dir>/checkpoints/best")
        return self


class DeltaMemGRPOConfig(RecipeConfig):
    """DeltaMem's manager: GRPO over (turns, bank before, target bank after) triples built by a
    teacher's run over LoCoMo (`env.deltamem_targets`); R = 0.1 format + 0.1 retrieval + 0.8
    soft-state F1 (`env.deltamem_env`), every call of a rollout's trace a row with its advantage."""

    teacher: Literal["heuristic", "llm"] = Field("heuristic", description="Who builds the target states: the heuristic policies, or any OpenAI-compatible model at teacher_url as the manager.")
    teacher_url: str | None = None
    teacher_model: str | None = None
    teacher_prompt: str = Field("deltamem/v1", description="The LLM teacher's manager prompt.")
    embedder: Literal["minilm", "hash"] = "minilm"
    turns_per_state: int = Field(1, ge=1, description="Turns of one session per state (large: whole sessions, DeltaMem's unit).")
    related_k: int = Field(5, ge=1, description="Memories shown before any lookup.")
    max_lookups: int = Field(2, ge=0, description="Searches the manager may make before its ops.")
    lookup_k: int = Field(5, ge=1, description="Memories one search returns.")
    tau: float = Field(0.5, description="Phi threshold of the soft state F1's matching (cosine of the embedder's vectors).")
    w_format: float = 0.1
    w_retrieval: float = 0.1
    w_state: float = 0.8
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_states: int | None = 16
    max_val_states: int | None = 4
    group_size: int = Field(4, ge=2, description="Rollouts per state: one group.")
    prompts_per_step: int = Field(2, ge=1)
    max_tokens: int = Field(64, ge=1, description="Per call (a search or the final ops).")

    @model_validator(mode="after")
    def _llm_teacher_needs_url(self) -> "DeltaMemGRPOConfig":
        if self.teacher == "llm" and not self.teacher_url:
            raise ValueError("teacher 'llm' needs teacher_url (any OpenAI-compatible server)")
        return self

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
