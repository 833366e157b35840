"""DeltaMem's manager trained with GRPO on the state it leaves, against target states.

    state    a `TargetTriple`: turns (one, a chunk, or a session), the facts taken from each,
             the bank before and the target bank after (`env.deltamem_targets`: a teacher's
             run through the client, or an app's hand corrections in the interaction log)
    rollout  the runtime's own DeltaMem steps (`ingest_steps` with the DeltaMem manager, its
             `Lookup`s run as searches) over a fork of the bank before; every model call is
             sampled from the policy at the training temperature (`env.deltamem_env`)
    reward   R = 0.1 R_format + 0.1 R_retrieval + 0.8 R_state (soft state F1 vs the target)
    groups   the G rollouts of one state: A = (R - mean) / (std + eta)
    rows     EVERY model call of a rollout (each lookup turn and the final ops, over all the
             state's turns) is one row of the update with the rollout's advantage
    update   PPO-clip with the loop's KL to the adapter-free model (DeltaMem: standard GRPO)

Each term is logged on its own (``format``, ``retrieval``, ``state_f1``; and ``lookups``, the
searches per rollout, a diagnostic) and drawn in curves.png. Out of the box the targets
are the heuristic teacher's over LoCoMo (conv-26 train, conv-30 validation); ``teacher: llm``
with ``teacher_url`` makes any OpenAI-compatible model the teacher; another dataset comes in
by overriding `DeltaMemRecipe.triples` (e.g. with `correction_triples` over an app's log).

Run: ``python -m memsdk_training train deltamem --config training/configs/deltamem_grpo.yaml``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from memsdk.embedding import Embedder
from memsdk.llm.base import SamplingParams

from ..env.deltamem_env import TERMS, DeltaMemEnv, DeltaRollout
from ..env.deltamem_targets import TargetTriple, heuristic_teacher, llm_teacher, locomo_triples
from ..rewards.deltamem import DeltaMemConfig
from .config import RecipeConfig
from .loop import Recipe, RecipeData, step_seed
from .manager import make_embedder
from .metrics import DEFAULT_CURVES
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Completion, Sampled, SampledGroup

__all__ = ["DeltaMemGRPOConfig", "DeltaMemSampler", "DeltaMemRecipe", "rollout_sample", "TERMS"]


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


def rollout_sample(rollout: DeltaRollout) -> Sampled:
    """A rollout as a group member: its reward, its terms, and each of its model calls as a row."""
    calls = tuple(Completion(c.prompt, c.token_ids, c.parse_failed) for c in rollout.calls)
    return Sampled(rollout.reward, calls, rollout.calls[-1].text if rollout.calls else "", {**rollout.terms, "lookups": float(rollout.lookups)})


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class DeltaMemSampler:
    """The recipe's `Sampler`: G rollouts of a triple -> one group."""

    def __init__(self, env: DeltaMemEnv, max_tokens: int) -> None:
        self.env, self.max_tokens = env, max_tokens

    def key(self, state: TargetTriple) -> str:
        return state.key

    def rollouts(self, state: TargetTriple, params: SamplingParams) -> list[DeltaRollout]:
        # a seed per rollout: the G rollouts must differ, and a rerun must repeat them
        return [self.env.roll_out(state, params.model_copy(update={"n": 1, "seed": step_seed(params.seed or 0, "rollout", g)})) for g in range(params.n)]

    def sample(self, state: TargetTriple, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        return [SampledGroup(state.key, tuple(rollout_sample(r) for r in self.rollouts(state, params)))]

    def evaluate(self, states: Sequence[TargetTriple]) -> dict[str, float]:
        """Greedy rollouts of held-out triples: the mean R, each term, searches and parse failures."""
        greedy = SamplingParams(temperature=0.0, max_tokens=self.max_tokens, seed=0)
        done = [r for s in states for r in self.rollouts(s, greedy.model_copy(update={"n": 1}))]
        calls = [c for r in done for c in r.calls]
        return {
            "reward": _mean([r.reward for r in done]),
            **{name: _mean([r.terms[name] for r in done]) for name in TERMS},
            "lookups": _mean([float(r.lookups) for r in done]),
            "parse_failure_rate": _mean([float(c.parse_failed) for c in calls]),
        }


class DeltaMemRecipe(Recipe[TargetTriple]):
    role = "manager"
    config: DeltaMemGRPOConfig
    curves = (*DEFAULT_CURVES, *TERMS, "lookups")

    def __init__(self, config: DeltaMemGRPOConfig) -> None:
        super().__init__(config)

    def published_roles(self) -> dict[str, str | None]:
        # the manifest names deltamem/v1, so a client serves the adapter as DeltaMem's manager
        assert isinstance(self.data.sampler, DeltaMemSampler)
        return {self.role: self.data.sampler.env.prompt_id}

    def teacher(self, embedder: Embedder, sample_id: str) -> Any:
        """The client whose run makes the targets of one conversation (its own in-memory bank)."""
        cfg = self.config
        folder = self.out / "teacher" / sample_id
        if cfg.teacher == "llm":
            assert cfg.teacher_url is not None  # the config's validator
            return llm_teacher(embedder, cfg.teacher_url, cfg.teacher_model, prompt=cfg.teacher_prompt, data_dir=folder, related_k=cfg.related_k)
        return heuristic_teacher(embedder, folder, related_k=cfg.related_k)

    def triples(self, embedder: Embedder) -> tuple[list[TargetTriple], list[TargetTriple]]:
        """Train and validation triples: the teacher's over LoCoMo (override for another dataset)."""
        cfg = self.config

        def pick(ids: Sequence[str], n: int | None) -> list[TargetTriple]:
            out: list[TargetTriple] = []
            for sample_id in ids:
                if n is not None and len(out) >= n:
                    break
                client = self.teacher(embedder, sample_id)
                try:
                    out += itertools.islice(locomo_triples(sample_id, client, turns_per_state=cfg.turns_per_state), None if n is None else n - len(out))
                finally:
                    client.close()
            return out

        return pick(cfg.train_ids, cfg.max_train_states), pick(cfg.val_ids, cfg.max_val_states)

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[TargetTriple]:
        cfg = self.config
        embedder = make_embedder(cfg.embedder)
        train, val = self.triples(embedder)
        reward = DeltaMemConfig(tau=cfg.tau, w_format=cfg.w_format, w_retrieval=cfg.w_retrieval, w_state=cfg.w_state)
        env = DeltaMemEnv(
            rollouts.backend, policy.render, embedder, model=rollouts.model, related_k=cfg.related_k, max_lookups=cfg.max_lookups,
            lookup_k=cfg.lookup_k, config=reward,
        )  # fmt: skip
        return RecipeData(DeltaMemSampler(env, cfg.max_tokens), [t for t in train if t.asks_the_manager], [t for t in val if t.asks_the_manager])
