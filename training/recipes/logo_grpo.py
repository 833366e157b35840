"""Memory-R2 trained with LoGo-GRPO: one backbone for extractor + manager, session rewards,
global and local groups, step-level ratio, and a session-length curriculum.

The loop is `recipes.loop`'s; this recipe brings its sampler (`LogoSampler`) and its stages.
Per optimisation step, on one episode of T sessions (a LoCoMo conversation cut to the
current stage's length):

    1. global   n full rollouts (EpisodeRunner.group: one QA subset per session, shared);
                group g_t = session t's reward R_t across the n rollouts
    2. local    for each session t, with probability p_local: pick an anchor rollout, restore
                its memory as it was before S_t, re-run S_t m times AT THE TRAINING
                TEMPERATURE (EpisodeRunner.reroll refuses greedy: identical re-rolls carry no
                signal); group l_t = the m re-rolls' rewards
    3. advantages  each group normalised on its own (the loop's `GroupLearner`), never across
    4. rows     every extractor / manager call of a session outcome is one step and takes
                that outcome's advantage
    5. update   PPO with the step-level ratio rho_u = exp(mean log-ratio over the step's
                tokens), dual clip c = 3, log-ratio cap 3, KL k3 to the adapter-free model,
                entropy bonus, step-mean aggregation (the config's defaults)

Curriculum: ``curriculum = (8, 16, 32)`` runs ``steps`` steps per stage on episodes of that
many sessions; each stage starts from the previous stage's best validation checkpoint (not
its last one) with a fresh optimizer (the loop's stages). Validation: greedy rollouts of the
held-out episodes, mean session reward (``reward``) and QA F1.

The published adapter serves both roles (one backbone): it is exported as ``extractor`` and
``manager``, each manifest naming the r2 prompt that role was trained with, so a client
serves the adapter with that prompt instead of its Memory-R1 default.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from memsdk.embedding import Embedder
from memsdk.llm.base import SamplingParams
from memsdk.policies import Answerer, PolicyConfig

from ..advantages import LogoGroup
from ..env import Episode, EpisodeConfig, EpisodeRollout, EpisodeRunner, SessionOutcome, locomo_episode
from ..losses import AggregationMode, RatioLevel
from ..rewards import SessionRewardConfig
from .config import RecipeConfig
from .loop import Recipe, RecipeData, Stage
from .manager import frozen_answerer, make_embedder
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Completion, Sampled, SampledGroup

__all__ = ["LogoGRPOConfig", "LogoStep", "LogoSampler", "LogoGRPORecipe"]


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


@dataclass(frozen=True)
class LogoStep:
    """What one episode sampled, kept for inspection."""

    rollouts: tuple[EpisodeRollout, ...]
    groups: tuple[LogoGroup, ...]
    members: tuple[tuple[SessionOutcome, ...], ...]  # members[k][i]: the outcome behind groups[k].rewards[i]


def outcome_sample(outcome: SessionOutcome, policy: LoRAModel) -> Sampled:
    """A session outcome as a group member: its reward, and each of its calls as a row."""
    calls = tuple(Completion(policy.render(c.messages), tuple(c.token_ids or ()), c.failure is not None) for c in outcome.calls)
    return Sampled(outcome.reward, calls)


class LogoSampler:
    """Global groups from n full rollouts of an episode, local groups from re-rolls of one session."""

    def __init__(self, runner: EpisodeRunner, eval_runner: EpisodeRunner, policy: LoRAModel, config: LogoGRPOConfig) -> None:
        self.runner, self.eval_runner, self.policy, self.config = runner, eval_runner, policy, config
        self.last: LogoStep | None = None

    def key(self, state: Episode) -> str:
        return state.key

    def sample(self, state: Episode, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        cfg = self.config
        # 1. global groups: n full rollouts; session t's rewards across them form one group
        rollouts = tuple(self.runner.group(state, params.n, seed=seed))
        sessions = range(len(state.sessions))
        groups = [LogoGroup("global", t, [r.sessions[t].reward for r in rollouts]) for t in sessions]
        members = [tuple(r.sessions[t] for r in rollouts) for t in sessions]
        # 2. local groups: m re-rolls of session t from one anchor's memory before t
        rng = random.Random(f"{seed}:local")
        for t in sessions:
            if rng.random() < cfg.p_local:
                anchor = rng.randrange(len(rollouts))
                rerolls = tuple(self.runner.reroll(rollouts[anchor], t, cfg.rerolls, seed=seed))
                groups.append(LogoGroup("local", t, [o.reward for o in rerolls], anchor=anchor))
                members.append(rerolls)
        self.last = LogoStep(rollouts, tuple(groups), tuple(members))
        # 3-4. each group is normalised on its own by the learner; every call of an outcome is a row
        return [
            SampledGroup(f"{state.key}/{g.branch}{g.session}", tuple(outcome_sample(o, self.policy) for o in outcomes), local=g.branch == "local")
            for g, outcomes in zip(groups, members)
        ]

    def evaluate(self, states: Sequence[Episode]) -> dict[str, float]:
        outcomes = [o for e in states for o in self.eval_runner.rollout(e, tag="eval").sessions]
        n = max(1, len(outcomes))
        return {"reward": sum(o.reward for o in outcomes) / n, "qa_f1": sum(o.qa_f1 for o in outcomes) / n, "compression": sum(o.compression for o in outcomes) / n}


class LogoGRPORecipe(Recipe[Episode]):
    role = "manager"
    config: LogoGRPOConfig
    rerolls = True

    def __init__(self, config: LogoGRPOConfig) -> None:
        super().__init__(config)

    def _components(self, rollouts: RolloutEngine) -> tuple[Embedder, Answerer]:
        return make_embedder(self.config.embedder), frozen_answerer(self.config.answerer, rollouts)

    def episodes(self, sessions: int) -> tuple[list[Episode], list[Episode]]:
        """Train and validation episodes of a stage: the first ``sessions`` sessions."""
        cfg = self.config
        return [locomo_episode(i, max_sessions=sessions) for i in cfg.train_ids], [locomo_episode(i, max_sessions=sessions) for i in cfg.val_ids]

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[Episode]:
        cfg = self.config
        embedder, answerer = self._components(rollouts)
        episode_config = EpisodeConfig(
            chunk_turns=cfg.chunk_turns, related_k=cfg.related_k, answer_k=cfg.answer_k, qa_per_session=cfg.qa_per_session,
            reward=SessionRewardConfig(alpha=cfg.alpha, lambda_comp=cfg.lambda_comp),
        )  # fmt: skip

        def runner(params: SamplingParams) -> EpisodeRunner:
            # one model name for both roles; unconstrained and never re-asked, as in ManagerRecipe
            policy_config = PolicyConfig(model=rollouts.model, params=params, constrained=False, reask=False)
            return EpisodeRunner(rollouts.backend, answerer, embedder, policy_config, episode_config)

        train_runner = runner(SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed))
        sampler = LogoSampler(train_runner, runner(SamplingParams(temperature=0.0, max_tokens=cfg.max_tokens)), policy, cfg)
        train, val = self.episodes(cfg.curriculum[0])
        return RecipeData(sampler, train, val)

    def make_stages(self) -> list[Stage[Episode]]:
        """One stage per curriculum length, each in its own checkpoint folder ``stage-<i>-<n>``."""
        return [
            Stage(*self.episodes(n), folder=f"stage-{i}-{n}", tags={"stage": i, "sessions": n}, seed_key=(i,))
            for i, n in enumerate(self.config.curriculum)
        ]

    def published_roles(self) -> dict[str, str | None]:
        assert isinstance(self.data.sampler, LogoSampler)
        return dict(self.data.sampler.runner.prompt_ids())
