"""MemAgent's reader trained with Multi-Conv DAPO over long-document QA samples cut from LoCoMo.

    sample   a window of ``sessions_per_sample`` LoCoMo sessions rendered as one document
             (``speaker (on date): text`` lines, the runtime's `chunk_turns`, so the chunks are
             exactly what `client.read(turns, chunk_tokens=...)` reads) and the questions whose
             every evidence turn lies inside it (``qa_per_sample`` drawn once per group)
    rollout  every chunk's conversation (the runtime reader rewrites the fixed-budget memory),
             then each question answered from the final memory as `client.answer` would show
             it (`env.memagent_env`); by default the policy answers (MemAgent), so the answers
             are the rollout's last conversations
    reward   R_i = mean over questions of coverage (multi-answer) or equivalence (exact match)
    groups   the G rollouts of a sample are ONE group: A_i = R_i - mean R (Dr.GRPO, no std),
             and every token of every conversation of rollout i takes A_i: each call is a
             `Completion` of the member, which `GroupLearner` turns into a row with its advantage
    update   PPO-clip with DAPO's asymmetric clip (1 - 0.2, 1 + 0.28), the token mean over all
             rows (``aggregation: token-mean``), beta * KL(pi || pi_ref) as the seed's
             objective writes it (0.001, k3; ``kl_coef: 0`` drops it)
    dynamic  a group whose rewards are all equal is drawn again with fresh seeds, at most
             ``max_redraws`` times (`recipes.dynamic_sampling`); the redraws are logged

Every reward term is logged on its own (`TERMS`) and drawn in curves.png, with ``redraws``.
Train on conv-26, validate on conv-30 (greedy rollouts: ``reward`` = mean R). Run:
``python -m memsdk_training train memagent --config training/configs/memagent_dapo.yaml``.

Token mean: `update.ppo_update` weighs each micro-batch by its share of rows, so the loss is
the exact token mean over every conversation when ``micro_batch_size`` holds a step's rows
(G x (chunks + questions)), and a mean of per-micro-batch token means otherwise.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from memsdk.llm.base import SamplingParams
from memsdk.policies import Answerer, LLMAnswerer, PolicyConfig
from memsdk.policies.reader import LLMReader, chunk_turns
from memsdk.types import Scope

from ..env import sample_qa
from ..env.memagent_env import ReadRollout, roll_out_read
from ..env.state import QAItem
from ..losses import AggregationMode
from .config import RecipeConfig
from .dynamic_sampling import DynamicSampling
from .learners import Learned
from .loop import Recipe, RecipeData, step_seed
from .manager import frozen_answerer
from .metrics import DEFAULT_CURVES
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Completion, Sampled, SampledGroup
from .writer import questions, session_windows

__all__ = ["MemAgentDAPOConfig", "ReadSample", "MemAgentEnv", "MemAgentRecipe", "read_samples", "to_sampled", "TERMS"]


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


#: the metrics row's name for each reward term (`ReadRollout.terms`)
TERMS = ("answer_reward", "answer_em", "answer_coverage", "answer_f1", "memory_recall", "kept_old_rate", "memory_tokens", "answer_parse_failure_rate")


@dataclass(frozen=True)
class ReadSample:
    """A long-document QA sample: the document's chunks and the questions it answers."""

    key: str
    scope: Scope
    chunks: tuple[str, ...]
    questions: tuple[QAItem, ...]


def read_samples(sample_ids: Sequence[str], *, sessions: int, chunk_tokens: int, limit: int | None) -> list[ReadSample]:
    """Windows of ``sessions`` consecutive sessions of each conversation (`writer.session_windows`:
    those with a question whose evidence lies inside), rendered and chunked as `client.read` does."""
    windows = itertools.islice((w for i in sample_ids for w in session_windows(i, sessions)), limit)
    return [ReadSample(w.key, w.scope, tuple(chunk_turns([t for s in w.sessions for t in s.turns], chunk_tokens)), questions(w)) for w in windows]


def to_sampled(rollout: ReadRollout) -> Sampled:
    """One group member: the rollout's reward and every conversation that earned it (reads,
    then answers), so each becomes a row with the member's one advantage."""
    calls = tuple(Completion(c.prompt, c.token_ids, c.parse_failed) for c in rollout.conversations)
    return Sampled(rollout.reward, calls, rollout.memory, rollout.terms())


class MemAgentEnv:
    """The recipe's `Sampler`: G rollouts of a sample -> one group."""

    def __init__(self, reader: LLMReader, answerer: LLMAnswerer | Answerer, policy: LoRAModel, config: MemAgentDAPOConfig) -> None:
        self.reader, self.answerer, self.policy, self.config = reader, answerer, policy, config

    def key(self, state: ReadSample) -> str:
        return state.key

    def rollouts(self, state: ReadSample, params: SamplingParams, *, qa_seed: int, n: int) -> list[ReadRollout]:
        cfg = self.config
        qa = sample_qa(state.questions, cfg.qa_per_sample, random.Random(qa_seed))  # the same questions judge the whole group
        return [
            roll_out_read(
                state.chunks, qa, state.scope, self.reader, self.policy.render, params.model_copy(update={"seed": step_seed(params.seed or 0, "rollout", g)}),
                budget_tokens=cfg.budget_tokens, answerer=self.answerer, policy_answers=cfg.answerer == "policy",
            )  # fmt: skip
            for g in range(n)
        ]

    def sample(self, state: ReadSample, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        done = self.rollouts(state, params, qa_seed=seed, n=params.n)
        return [SampledGroup(state.key, tuple(to_sampled(r) for r in done))]

    def evaluate(self, states: Sequence[ReadSample]) -> dict[str, float]:
        """Greedy rollouts on held-out samples, each asked ``qa_per_sample`` of its questions
        (the same ones at every evaluation): the mean R and each term."""
        greedy = SamplingParams(temperature=0.0, max_tokens=self.config.max_tokens, seed=0)
        cfg = self.config
        done = [
            roll_out_read(s.chunks, sample_qa(s.questions, cfg.qa_per_sample, random.Random(i)), s.scope, self.reader, self.policy.render, greedy,
                          budget_tokens=cfg.budget_tokens, answerer=self.answerer, policy_answers=cfg.answerer == "policy")
            for i, s in enumerate(states)
        ]  # fmt: skip
        terms = [r.terms() for r in done]
        return {"reward": _mean([r.reward for r in done]), **{k: _mean([t[k] for t in terms]) for k in TERMS}}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class MemAgentRecipe(Recipe[ReadSample]):
    role = "reader"
    config: MemAgentDAPOConfig
    curves = (*DEFAULT_CURVES, *TERMS, "redraws")

    def __init__(self, config: MemAgentDAPOConfig) -> None:
        super().__init__(config)

    def published_roles(self) -> dict[str, str | None]:
        roles: dict[str, str | None] = {self.role: self.env.reader.caller.prompt.id}
        if isinstance(self.env.answerer, LLMAnswerer) and self.config.answerer == "policy":
            roles["answerer"] = self.env.answerer.caller.prompt.id  # trained on its answers too
        return roles

    def samples(self) -> tuple[list[ReadSample], list[ReadSample]]:
        cfg = self.config
        make = lambda ids, n: read_samples(ids, sessions=cfg.sessions_per_sample, chunk_tokens=cfg.chunk_tokens, limit=n)  # noqa: E731
        return make(cfg.train_ids, cfg.max_train_samples), make(cfg.val_ids, cfg.max_val_samples)

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[ReadSample]:
        cfg = self.config
        settings = PolicyConfig(model=rollouts.model, constrained=False, reask=False)  # the trainers' reading: no re-ask
        reader = LLMReader(rollouts.backend, settings)
        answerer = LLMAnswerer(rollouts.backend, settings) if cfg.answerer == "policy" else frozen_answerer(cfg.answerer, rollouts)
        self.env = MemAgentEnv(reader, answerer, policy, cfg)
        self.dynamic = DynamicSampling(self.env, cfg.max_redraws)
        train, val = self.samples()
        return RecipeData(self.dynamic, train, val)

    def _metrics_row(self, groups: Sequence[SampledGroup], learned: Learned, seconds: float) -> dict[str, Any]:
        return {**super()._metrics_row(groups, learned, seconds), **self.dynamic.take_metrics()}
