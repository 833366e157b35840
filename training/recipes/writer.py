"""Mem-alpha's writer trained with GRPO and no KL term.

    state    a sample: a window of LoCoMo sessions, cut into chunks of ``chunk_turns`` turns,
             and the questions whose evidence lies in it (at most qa_per_sample, drawn once
             per group)
    rollout  from an empty bank, one writer reply per chunk, sampled at the training
             temperature and applied by the runtime's `write_steps` (`env.writer_env`)
    reward   R_t = R1 + R2_t + w3 * R3 + w4 * R4_t per step t; R1 (QA through the frozen
             retriever + answerer) and R3 (compression) are the rollout's, R2_t (calls that
             executed) and R4_t (calls the judge finds valid) the step's
    groups   step t of the G rollouts of one sample is one group: A = (R - mean) / (std + eta).
             After the first step the G prompts differ (each rollout reached step t with its
             own memory), so each row keeps its own prompt; Mem-alpha's groups are the same
             (all rollouts of one sample)
    update   PPO-clip with kl_coef 0 (Mem-alpha drops the KL term; no reference pass runs)

Each reward term is logged on its own (``r1_qa``, ``r2_format``, ``r3_compression``,
``r4_content``) and drawn in curves.png. Run:
``python -m memsdk_training train writer --config training/configs/writer_grpo.yaml``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import Field, model_validator

from memsdk.llm.base import SamplingParams
from memsdk.policies import LLMWriter, PolicyConfig
from memsdk.types import Scope

from ..env import Episode, Session, conversation, locomo_episode, sample_qa
from ..env.state import QAItem
from ..env.writer_env import CallJudge, Frozen, WriterRollout, grounded_judge, llm_judge, roll_out
from ..rewards import MemAlphaConfig
from .config import RecipeConfig
from .loop import Recipe, RecipeData, step_seed
from .manager import frozen_answerer, make_embedder
from .metrics import DEFAULT_CURVES
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Sampled, SampledGroup

__all__ = ["WriterGRPOConfig", "WriterEnv", "WriterRecipe", "session_windows", "TERMS"]


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


#: the metrics row's name for each reward term
TERMS = ("r1_qa", "r2_format", "r3_compression", "r4_content")


def session_windows(sample_id: str, size: int) -> Iterator[Episode]:
    """Consecutive windows of ``size`` sessions of one conversation, each with the questions
    whose every evidence turn lies inside it (windows without one are skipped)."""
    whole = locomo_episode(sample_id)
    for start in range(0, len(whole.sessions), size):
        sessions = whole.sessions[start : start + size]
        inside = {t.turn_id for s in sessions for t in s.turns}
        qa = tuple(q for s in whole.sessions for q in s.qa if q.evidence and set(q.evidence) <= inside)
        if not qa:
            continue
        key = f"{sample_id}/w{start}"
        kept = tuple(Session(s.key, s.turns, ()) for s in sessions[:-1]) + (Session(sessions[-1].key, sessions[-1].turns, qa),)
        yield Episode(key, Scope(user_id="locomo", run_id=key), kept)


def questions(episode: Episode) -> tuple[QAItem, ...]:
    return tuple(q for s in episode.sessions for q in s.qa)


class WriterEnv:
    """The recipe's `Sampler`: G rollouts of a sample -> one group per write step."""

    def __init__(self, writer: LLMWriter, policy: LoRAModel, frozen: Frozen, config: WriterGRPOConfig) -> None:
        self.writer, self.policy, self.frozen, self.config = writer, policy, frozen, config
        self.weights = MemAlphaConfig(w3=config.w3, w4=config.w4)

    def key(self, state: Episode) -> str:
        return state.key

    def rollouts(self, state: Episode, params: SamplingParams, *, qa_seed: int, n: int) -> list[WriterRollout]:
        qa = sample_qa(questions(state), self.config.qa_per_sample, random.Random(qa_seed))
        # a seed per rollout: the G rollouts must differ, and a rerun must repeat them
        return [roll_out(state, self.writer, self.policy.render, params.model_copy(update={"seed": step_seed(params.seed or 0, "rollout", g)}), self.frozen, qa) for g in range(n)]

    def sample(self, state: Episode, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        """Step t of the G rollouts is a group; each member keeps its own prompt and its reward's terms."""
        done = self.rollouts(state, params, qa_seed=seed, n=params.n)
        rewards = [r.rewards(self.weights) for r in done]
        groups = []
        for t in range(min(len(r.steps) for r in done)):
            samples = tuple(
                Sampled.reply(r.steps[t].prompt, r.steps[t].token_ids, r.steps[t].text, rewards[g][t], parse_failed=r.steps[t].parse_failed, terms=step_terms(r, t))
                for g, r in enumerate(done)
            )  # fmt: skip
            groups.append(SampledGroup(f"{state.key}/step{t}", samples))
        return groups

    def evaluate(self, states: Sequence[Episode]) -> dict[str, float]:
        """Greedy rollouts on held-out samples: the mean R_t and each term."""
        greedy = SamplingParams(temperature=0.0, max_tokens=self.config.max_tokens, seed=0)
        done = [r for i, s in enumerate(states) for r in self.rollouts(s, greedy, qa_seed=i, n=1)]
        return {"reward": _mean([x for r in done for x in r.rewards(self.weights)]), **terms(done)}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def step_terms(rollout: WriterRollout, t: int) -> dict[str, float]:
    """The terms behind R_t: the rollout's R1 and R3, step t's R2 and R4."""
    step = rollout.steps[t]
    return {"r1_qa": rollout.qa, "r2_format": step.format_score, "r3_compression": rollout.compression, "r4_content": step.content_score}


def terms(rollouts: Sequence[WriterRollout]) -> dict[str, float]:
    """Each reward term's mean: R1 and R3 over rollouts, R2 and R4 over their steps."""
    steps = [s for r in rollouts for s in r.steps]
    return {
        "r1_qa": _mean([r.qa for r in rollouts]),
        "r2_format": _mean([s.format_score for s in steps]),
        "r3_compression": _mean([r.compression for r in rollouts]),
        "r4_content": _mean([s.content_score for s in steps]),
    }


class WriterRecipe(Recipe[Episode]):
    role = "writer"
    config: WriterGRPOConfig
    curves = (*DEFAULT_CURVES, *TERMS)

    def __init__(self, config: WriterGRPOConfig) -> None:
        super().__init__(config)

    def published_roles(self) -> dict[str, str | None]:
        assert isinstance(self.data.sampler, WriterEnv)
        return {self.role: self.data.sampler.writer.caller.prompt.id}

    def judge(self) -> CallJudge:
        cfg = self.config
        if cfg.judge == "grounded":
            return grounded_judge
        from memsdk.llm.openai_compat import OpenAICompatibleBackend  # memsdk.llm's lazy name is typed `object`

        assert cfg.judge_url is not None  # the config's validator
        return llm_judge(OpenAICompatibleBackend(cfg.judge_url, model=cfg.judge_model or "judge"), cfg.judge_model)

    def samples(self) -> tuple[list[Episode], list[Episode]]:
        cfg = self.config
        pick = lambda ids, n: list(itertools.islice((w for i in ids for w in session_windows(i, cfg.sessions_per_sample)), n))  # noqa: E731
        return pick(cfg.train_ids, cfg.max_train_samples), pick(cfg.val_ids, cfg.max_val_samples)

    def frozen(self, rollouts: RolloutEngine) -> Frozen:
        cfg = self.config
        return Frozen(make_embedder(cfg.embedder), frozen_answerer(cfg.answerer, rollouts), self.judge(), cfg.metric, cfg.answer_k, cfg.related_k, cfg.chunk_turns)

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[Episode]:
        writer = LLMWriter(rollouts.backend, PolicyConfig(model=rollouts.model, constrained=False, reask=False))
        train, val = self.samples()
        return RecipeData(WriterEnv(writer, policy, self.frozen(rollouts), self.config), train, val)
