"""Retraining from an app's own traffic, as one command that ends in the release gate.

    memsdk train answerer|manager --from-log DATA_DIR [--steps N] [--config FILE] [--version V]
    python -m memsdk_training retrain answerer|manager --from-log DATA_DIR ...        (the same)

1. states   from the answers the app's users judged with ``client.feedback`` (a gold, or
            "correct"). The answerer's: the question, the memories it was shown as they stood
            then, the gold (`memsdk.gate.log_answer_cases`). The manager's: each logged
            ingest whose memories such an answer cited, with the bank as it was just before
            it, its facts, and those questions (`log_manager_cases`)
2. split    each state's key hashed with the seed: ``holdout`` of them are never trained on,
            so the gate judges the candidate on questions it has not seen
3. train    the role's recipe (Memory-R1's GRPO, the config file's settings) on the rest;
            its checkpoints are compared on those same training states, never on the
            held-out ones (choosing the best on the gate's states would bias the gate toward
            a pass); the best adapter is published into the data dir's checkpoints, not
            promoted
4. gate     ``client.promote(role, version, on=held_out)``: the candidate serves only if it
            beats the version serving now on the held-out states; the decision is stored
            beside the manifest either way, and `memsdk policies` shows it

The client is the app's own (its data dir, its served or in-process model), so the gate
replays exactly what would serve; the manager's gate judges both managers' banks with the
answerer serving now. The manager's states hold the client's vectors, so its recipe must use
the client's embedder (MiniLM, the packaged config's).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from memsdk import GateFailed, InvalidInput, MemoryClient
from memsdk.gate import AnswerCase, ManagerCase, log_answer_cases, log_manager_cases
from memsdk.gate import GateConfig, GateDecision

from .recipes.answerer import AnswererGRPOConfig
from .recipes.config import PublishSettings, load_config
from .recipes.manager import ManagerGRPOConfig

__all__ = ["Job", "RetrainConfig", "Retrained", "Trainer", "split_states", "retrain", "train_answerer", "train_manager"]

#: a state of either role's gate: what `split_states` splits and a `Job` trains on
State = AnswerCase | ManagerCase


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


S = TypeVar("S", bound=_Keyed)
C = TypeVar("C", AnswererGRPOConfig, ManagerGRPOConfig)



@dataclass(frozen=True)
class Job:
    """One training run: train on ``train``, pick the best checkpoint on ``val``, publish ``version`` into
    ``registry_dir`` (not promoted); ``workdir`` holds its checkpoints, metrics and curves."""

    train: Sequence[State]
    val: Sequence[State]
    version: str
    registry_dir: Path
    workdir: Path


#: runs a `Job` and says how it went (steps, validation reward before / after)
Trainer = Callable[[Job], dict[str, Any]]


class RetrainConfig(BaseModel):
    """What the retraining command decides besides the recipe's own settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["answerer", "manager"] = "answerer"
    recipe_config: str | None = Field(None, description="The recipe's YAML/JSON config; None: the packaged configs/<role>_grpo.yaml.")
    steps: int | None = Field(None, ge=1, description="Overrides the recipe config's steps.")
    version: str | None = Field(None, description="The published version's name; None: <role>-log-<unix time>.")
    holdout: float = Field(0.3, gt=0.0, lt=1.0, description="Share of the judged answers kept out of training for the gate.")
    min_states: int = Field(4, ge=2, description="Fewer states than this is an error: nothing to learn or judge.")
    seed: int = 0
    margin: float = Field(0.0, description="The gate's margin: the reward difference's lower bound must exceed it.")


@dataclass(frozen=True)
class Retrained:
    version: str
    train_states: int
    held_out_states: int
    training: dict[str, Any]
    decision: GateDecision
    promoted: bool

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version, "promoted": self.promoted, "train_states": self.train_states, "held_out_states": self.held_out_states,
            "training": self.training, "gate": self.decision.summary(),
        }  # fmt: skip


def split_states(states: Sequence[S], holdout: float, seed: int = 0) -> tuple[list[S], list[S]]:
    """(train, held out): the ``round(holdout * n)`` states whose seeded key hashes are
    smallest are held out (at least one, and at least one is left to train on), so the split
    depends on the states and the seed only, not on their order."""

    def u(case: S) -> bytes:
        return hashlib.sha256(f"{seed}:{case.key}".encode()).digest()

    k = min(len(states) - 1, max(1, round(holdout * len(states))))
    chosen = {c.key for c in sorted(states, key=u)[:k]}
    return [c for c in states if c.key not in chosen], [c for c in states if c.key in chosen]


def _config(role: str, recipe_config: str | None, steps: int | None, job: Job, kind: type[C]) -> C:
    path = recipe_config or str(files("memsdk_training") / "configs" / f"{role}_grpo.yaml")
    config = load_config(path, kind, steps=steps, output_dir=str(job.workdir))
    return config.model_copy(update={"publish": PublishSettings(registry_dir=str(job.registry_dir), version=job.version, promote=False)})


def _trained(recipe: Any, job: Job) -> dict[str, Any]:
    recipe.setup()
    try:
        rows = recipe.train()
    finally:
        recipe.cleanup()
    first, last = recipe.evals[0], recipe.evals[-1]
    return {"steps": len(rows), "val_reward_before": first.get("reward"), "val_reward_after": last.get("reward"), "output_dir": str(job.workdir)}


def train_answerer(recipe_config: str | None, steps: int | None) -> Trainer:
    """The answerer recipe as a `Trainer`: GRPO on the given states, its best adapter published."""

    def run(job: Job) -> dict[str, Any]:
        from .recipes.answerer import AnswererRecipe

        config = _config("answerer", recipe_config, steps, job, AnswererGRPOConfig)
        return _trained(AnswererRecipe(config, states=(job.train, job.val)), job)  # type: ignore[arg-type]  # AnswerCase states

    return run


def train_manager(recipe_config: str | None, steps: int | None) -> Trainer:
    """The manager recipe as a `Trainer`: GRPO over the logged ingests' states, its best adapter published."""

    def run(job: Job) -> dict[str, Any]:
        from .env import manager_states
        from .recipes.manager import ManagerRecipe

        config = _config("manager", recipe_config, steps, job, ManagerGRPOConfig)
        states = (manager_states(job.train), manager_states(job.val))  # type: ignore[arg-type]  # ManagerCase states
        return _trained(ManagerRecipe(config, states=states), job)

    return run


def retrain(client: MemoryClient, config: RetrainConfig = RetrainConfig(), *, trainer: Trainer | None = None) -> Retrained:
    """States from ``client``'s log, train, publish, gate (module docstring). A gate that
    fails promotes nothing and is no error: the result says so, with the decision."""
    if client.log is None:
        raise InvalidInput("client", "retraining from the log needs the interaction log (log_interactions=True)")
    states: list[State] = [*log_answer_cases(client.log, client.bank)] if config.role == "answerer" else [*log_manager_cases(client.log, client.bank)]
    if len(states) < config.min_states:
        what = "judged answers" if config.role == "answerer" else "logged ingests cited by a judged answer"
        raise InvalidInput("log", f"holds {len(states)} {what}, fewer than min_states={config.min_states}: give feedback with a gold (client.feedback) first")
    train, held = split_states(states, config.holdout, config.seed)
    version = config.version or f"{config.role}-log-{int(time.time())}"
    trainer = trainer or (train_answerer if config.role == "answerer" else train_manager)(config.recipe_config, config.steps)
    # the held-out states are the gate's alone: the recipe picks its best checkpoint on the training states
    training = trainer(Job(train, train, version, client.registry.root, client.config.data_dir / "training" / version))
    gate = GateConfig(margin=config.margin, seed=config.seed)
    try:
        decision = client.promote(config.role, version, on=held, config=gate)
        assert decision is not None  # promote gates unless forced
    except GateFailed as failed:
        decision = failed.decision
    return Retrained(version, len(train), len(held), training, decision, decision.passed)
