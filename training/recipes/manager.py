"""Memory-R1's manager trained with GRPO (or PPO with a value head), a frozen answer agent as the reward.

    state   (M_old, facts of turn x, questions whose evidence is x)       LoCoMo conv-26 / conv-30
            or (M_old, facts of x, the gold state after x)                the management benchmark
    reply   the manager's JSON ops, sampled n times from pi_theta         `ManagerEnv.sample_group`
    reward  EM (or F1) of the frozen answerer over T(M_old, ops)          the runtime's own bank + parser
            or the share of the gold state that holds (`rewards.validity`)
    learner GRPO over the group (`ManagerGRPOConfig`), or PPO with a value head
            (`ManagerPPOConfig`, Memory-R1's PPO variant)                 `recipes.learners`

The environment is the RL core's `ManagerEnv`; its manager policy is the runtime's
`LLMManager` on the training backend, so prompts, response prefixes, stop strings, aliases and
the op guard are exactly what the client will run the published adapter with.

Validation (greedy, on conv-30 states): ``reward`` = answer F1 through the frozen answerer
(denser than EM, so it picks the best checkpoint more reliably), ``answer_em``,
``valid_op_rate`` (replies that parse and whose ops the guard and the bank all accept) and
``parse_failure_rate``.

Warm start (``warm_start_steps`` > 0, `Recipe.warm_start`): SFT steps on the heuristic
manager's valid replies to the training states (`warm_start.teacher_examples`) before RL.

Run: ``python -m memsdk_training train manager --config training/configs/manager_grpo.yaml``
(``train manager-ppo --config training/configs/manager_ppo.yaml`` for PPO).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any, Literal, cast

import torch
from pydantic import Field, model_validator

from memsdk.embedding import Embedder
from memsdk.llm.base import LLMBackend, SamplingParams
from memsdk.policies import Answerer, ExtractiveAnswerer, LLMAnswerer, LLMManager, PolicyConfig

from ..env import EnvConfig, ManagerEnv, MemoryState, locomo_states
from ..env.manage import gold_ops, manage_states
from ..rewards import exact_match
from .config import RecipeConfig
from .loop import Recipe, RecipeData
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Sampled, SampledGroup
from .warm_start import TeacherExample, teacher_examples

__all__ = ["ManagerGRPOConfig", "ManagerPPOConfig", "ManagerGroups", "ManagerRecipe", "make_embedder", "frozen_answerer"]


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

    learner: Literal["value"] = Field(
        "value", description="Always PPO with a value head: groups of 1 and groups never dropped only work with the critic as the baseline."
    )
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


def make_embedder(kind: str) -> Embedder:
    from memsdk.embedding import HashEmbedder

    if kind == "hash":
        return HashEmbedder(64)
    from memsdk.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def frozen_answerer(kind: str, rollouts: RolloutEngine) -> Answerer:
    """The extractive heuristic, or the base model with the adapter off (no second copy)."""
    if kind == "extractive":
        return ExtractiveAnswerer()
    return LLMAnswerer(rollouts.backend, PolicyConfig(model=rollouts.base, constrained=False, reask=False))


class ManagerGroups:
    """The `Sampler` over `ManagerEnv`: a group per state for training, greedy decisions for validation."""

    def __init__(self, env: ManagerEnv, eval_env: ManagerEnv, policy: LoRAModel, qa_per_group: int | None) -> None:
        self.env, self.eval_env, self.policy, self.qa_per_group = env, eval_env, policy, qa_per_group

    def key(self, state: MemoryState) -> str:
        return state.key

    def sample(self, state: MemoryState, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        group = self.env.sample_group(state, params, qa_per_group=self.qa_per_group, seed=seed)
        prompt = self.policy.render(group.observation.messages)
        return [SampledGroup(state.key, tuple(Sampled.reply(prompt, r.token_ids or (), r.output, r.result.reward, parse_failed=r.result.parse_failed) for r in group.rollouts))]

    def evaluate(self, states: Sequence[MemoryState]) -> dict[str, float]:
        manager = self.eval_env.manager
        f1, em, valid, failed = [], [], [], []
        for state in states:
            related = self.eval_env.observe(state).related
            request = manager.request(state.facts, related)
            greedy = request.params.model_copy(update={"temperature": 0.0, "n": 1, "seed": None})
            backend = cast(LLMBackend, manager.backend)  # built on the rollouts' blocking backend (`environment`)
            choice = backend.chat(request.messages, params=greedy, model=request.model).choices[0]
            result = self.eval_env.step(state, manager.caller.reply_text(request, choice))
            f1.append(result.reward)
            em.append(sum(exact_match(a.prediction, a.item.answer) for a in result.answers) / max(1, len(result.answers)))
            valid.append(result.valid)
            failed.append(result.parse_failed)
        n = max(1, len(states))
        return {"reward": sum(f1) / n, "answer_f1": sum(f1) / n, "answer_em": sum(em) / n, "valid_op_rate": sum(valid) / n, "parse_failure_rate": sum(failed) / n}


class ManagerRecipe(Recipe[MemoryState]):
    role = "manager"
    config: ManagerGRPOConfig  # a ManagerPPOConfig (learner 'value') makes the learner PPO with a value head

    def __init__(self, config: ManagerGRPOConfig, *, states: tuple[Sequence[MemoryState], Sequence[MemoryState]] | None = None) -> None:
        """``states``: (train, validation) to train on instead of LoCoMo's, e.g. an app's logged
        ingests (`memsdk_training.env.log_states`, as `memsdk_training.retrain` does); their
        snapshots must hold vectors of ``config.embedder``'s size."""
        super().__init__(config)
        self.given = states

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[MemoryState]:
        embedder = make_embedder(self.config.embedder)
        train, val = self.given if self.given is not None else self.states(embedder)
        return RecipeData(self.environment(policy, rollouts, embedder), list(train), list(val))

    def published_roles(self) -> dict[str, str | None]:
        assert isinstance(self.data.sampler, ManagerGroups)
        return {self.role: self.data.sampler.env.manager.caller.prompt.id}

    def states(self, embedder: Embedder) -> tuple[list[MemoryState], list[MemoryState]]:
        """Train and validation states: LoCoMo per-turn states, or the management benchmark's
        (``states: manage``); `log_states` for an app's own traffic."""
        cfg = self.config
        if cfg.states == "manage":
            sources = (manage_states(embedder, "train", cfg.manage_scenarios[0]), manage_states(embedder, "val", cfg.manage_scenarios[1]))
        else:
            sources = (locomo_states(embedder, ids=cfg.train_ids), locomo_states(embedder, ids=cfg.val_ids))
        return list(itertools.islice(sources[0], cfg.max_train_states)), list(itertools.islice(sources[1], cfg.max_val_states))

    def environment(self, policy: LoRAModel, rollouts: RolloutEngine, embedder: Embedder) -> ManagerGroups:
        cfg = self.config
        # the runtime's manager on the training backend: unconstrained (log-probs are those of
        # free sampling) and never re-asked (a rollout is judged on what the policy wrote)
        manager = LLMManager(rollouts.backend, PolicyConfig(model=rollouts.model, constrained=False, reask=False, prompt_version=cfg.prompt_version))
        answerer = frozen_answerer(cfg.answerer, rollouts)
        env = ManagerEnv(manager, answerer, embedder, EnvConfig(related_k=cfg.related_k, answer_k=cfg.answer_k, metric=cfg.metric, format_reward=cfg.format_reward))
        eval_env = ManagerEnv(manager, answerer, embedder, EnvConfig(related_k=cfg.related_k, answer_k=cfg.answer_k, metric="f1"))
        return ManagerGroups(env, eval_env, policy, cfg.qa_per_group)

    def warm_start_examples(self) -> list[TeacherExample]:
        """The heuristic manager's replies to the training states that the environment accepts;
        on the management benchmark, the gold ops where they make the whole gold state hold."""
        assert isinstance(self.data.sampler, ManagerGroups)
        if self.config.states == "manage":
            return teacher_examples(self.data.sampler.env, self.data.train, self.policy.render, teacher=gold_ops, perfect=True)
        return teacher_examples(self.data.sampler.env, self.data.train, self.policy.render)
