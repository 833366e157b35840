"""The one on-policy loop every recipe runs, composed of plain objects.

A recipe is three parts and this loop:

    sampler   `Sampler`: states -> scored groups of rollouts from the current policy
              (single-call groups: the manager, the answerer; one group per write step:
              Mem-alpha's writer; global + local groups of whole episodes: LoGo-GRPO)
    learner   `learners.Learner`: scored groups -> one update of the weights
              (group-normalised GRPO / Dr.GRPO, or PPO with a value head)
    stages    the schedule: one stage, or a curriculum (LoGo-GRPO: 8 -> 16 -> 32 sessions)

and the loop reads top to bottom:

    for stage in stages[position:]:
        0. start       warm start from the previous stage's best checkpoint with a fresh
                       optimizer (stage > 0); evaluate: the stage's first best candidate
        for step in range(done, steps):
            1. rollouts    prompts_per_step states, the sampler's groups for each
            2-3. learn     the learner's advantages and update on them
            4. sync        the rollout engine sees the new weights (vLLM: reload the adapter)
            5. log         one JSONL row; eval every eval_every steps and at the end (a better
                           one becomes the stage's best checkpoint); checkpoint
    publish    the last stage's best adapter, for every role it was trained to serve

Where a reward is computed is the sampler's environment (`training.env`, calling the pure
functions of `training.rewards`); where the loss is taken is the learner (`recipes.update`,
`recipes.learners`); where a checkpoint is written is `save_checkpoint` below.

Data parallelism (`training.distributed`, under ``torchrun`` / ``accelerate launch`` or
``--nproc N``): each rank samples its share of a step's states, every rank receives every
group, each rank backpropagates its share of the rows and the gradients are summed; rank 0
alone evaluates and writes. A one-process run is the same loop in the one-process `World`.

Resume: a stage's ``last`` checkpoint holds the adapter, optimizer, RNG, training-only
modules (a value head), the step within the stage, the stage's best validation so far and
every evaluation. `setup` continues from the newest one: inside its stage, or at the next
stage's start when it had finished. Seeds and states depend only on (stage, step), so a
killed and resumed run writes the same rows and weights as an unbroken one (resumed with
any number of processes: the same rows up to float summation order).

torchtune's recipe shape: ``setup`` / ``train`` / ``save_checkpoint`` / ``cleanup``.
"""

from __future__ import annotations

import abc
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from tqdm import tqdm

from memsdk.llm.base import SamplingParams

from ..distributed import World
from ..checkpoint import data_hash, export_policy, latest_checkpoint, load_checkpoint, save_checkpoint
from .config import RecipeConfig
from .learners import Learned, Learner, learner_for
from .metrics import DEFAULT_CURVES, MetricsLog, plot_metrics
from .lora_model import LoRAModel
from .rollouts import RolloutEngine, rollout_engine
from .samples import SampledGroup, Sampler
from .update import update_metrics
from .warm_start import TeacherExample, sft_step, target_ids, warm_start_batches

__all__ = ["start_run", "RecipeData", "Stage", "Recipe", "step_seed"]

S = TypeVar("S")


@dataclass(frozen=True)
class RecipeData(Generic[S]):
    sampler: Sampler[S]
    train: Sequence[S]
    val: Sequence[S]


@dataclass(frozen=True)
class Stage(Generic[S]):
    """One part of the schedule: ``config.steps`` steps on its states."""

    train: Sequence[S]
    val: Sequence[S]
    folder: str = "checkpoints"  # under output_dir: the stage's last/ and best/
    tags: Mapping[str, Any] = field(default_factory=dict)  # written into each of its metrics rows and evaluations
    seed_key: tuple[object, ...] = ()  # part of every seed drawn in the stage


def start_run(config: RecipeConfig, out: Path) -> LoRAModel:
    """Seed Python and torch from the config, create the output folder, load the policy.

    Seeding comes first: LoRA's initial A matrices are drawn when the policy is built.
    """
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    out.mkdir(parents=True, exist_ok=True)
    return LoRAModel.from_config(config)


def step_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed for one call, from the run seed and where in the run the call is."""
    return random.Random(":".join(map(str, (seed, *parts)))).getrandbits(31)


class Recipe(abc.ABC, Generic[S]):
    role: str = "manager"
    curves: tuple[str, ...] = DEFAULT_CURVES  # drawn into curves.png, with the learner's own
    rerolls: bool = False  # the sampler draws local groups (LoGo): every row logs how many

    def __init__(self, config: RecipeConfig) -> None:
        self.config = config
        self.out = Path(config.output_dir)
        self.stage, self.step = 0, 0  # the run's position: `step` steps of stage `stage` are done
        self.best: dict[str, Any] | None = None  # the current stage's best evaluation
        self.evals: list[dict[str, Any]] = []  # every evaluation, with its stage's tags and any phase tag

    # -- the parts -------------------------------------------------------------------------------
    @abc.abstractmethod
    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[S]:
        """Build the sampler and the train / validation states."""

    def make_learner(self, policy: LoRAModel) -> Learner:
        """GRPO over the groups, or PPO with a value head when the config's ``learner`` is 'value'."""
        return learner_for(self.config, policy, self.world)

    def make_stages(self) -> list[Stage[S]]:
        """The schedule (override for a curriculum); default one stage on the data's states."""
        return [Stage(self.data.train, self.data.val)]

    def published_roles(self) -> dict[str, str | None]:
        """role -> the prompt id it was trained with (None: the role's default)."""
        return {self.role: None}

    def new_optimizer(self) -> torch.optim.Optimizer:
        groups = [{"params": self.policy.trainable_parameters()}, *self.learner.param_groups()]
        return torch.optim.AdamW(groups, lr=self.config.lr, weight_decay=self.config.weight_decay)

    def setup(self) -> None:
        self.world = World.from_env(self.config.device)
        if self.world.device != self.config.device:  # a CUDA rank's own GPU
            self.config = self.config.model_copy(update={"device": self.world.device})
        cfg = self.config
        self.policy = start_run(cfg, self.out)
        self.world.broadcast_parameters(self.policy.trainable_parameters())
        self.learner = self.make_learner(self.policy)
        self.optimizer = self.new_optimizer()
        self.rollouts = rollout_engine(cfg, self.policy, self.out, self.world)
        self.data = self._setup_data(self.policy, self.rollouts)
        self.stages = self.make_stages()
        if not all(s.train for s in self.stages):
            raise ValueError("no training states")
        self._resume()
        # rows past the checkpoint were written by the killed run and are about to be redone
        if self.world.main:
            self.metrics = MetricsLog(self.out / "metrics.jsonl", keep=lambda r: (r.get("stage", 0), r["step"]) <= (self.stage, self.step))

    def _resume(self) -> None:
        """Continue from the newest stage's ``last`` checkpoint, if any: inside that stage, or at
        the next stage's start when it had finished (its warm start then runs as in an unbroken run).
        Rank 0 finds it (finding repairs what a killed save left), and every rank loads it."""
        found = self.world.broadcast(self._newest_last() if self.world.main else None)
        if found is not None:
            index, last = found
            state = load_checkpoint(last, policy=self.policy, optimizer=self.optimizer, modules=self.learner.modules)
            self.rollouts.sync(self.policy)
            self.evals = state.extra.get("evals", [])
            if state.step >= self.config.steps and index + 1 < len(self.stages):
                self.stage, self.step, self.best = index + 1, 0, None
            else:
                self.stage, self.step, self.best = index, state.step, state.extra.get("best")

    def _newest_last(self) -> tuple[int, str] | None:
        """(stage index, path) of the newest stage's complete ``last`` checkpoint, or None."""
        for index in reversed(range(len(self.stages))):
            last = latest_checkpoint(self.out / self.stages[index].folder / "last")
            if last is not None:
                return index, str(last)
        return None

    # -- one step's pieces ---------------------------------------------------------------------
    @property
    def current(self) -> Stage[S]:
        return self.stages[self.stage]

    def states_for(self, step: int) -> list[S]:
        """prompts_per_step states; epoch e visits the stage's train set in a seeded permutation
        of its own, so a resumed run continues with exactly the states the interrupted one would
        have used."""
        train, k = self.current.train, self.config.prompts_per_step
        out = []
        for i in range(step * k, (step + 1) * k):
            epoch, pos = divmod(i, len(train))
            order = random.Random(f"{self.config.seed}:epoch:{epoch}").sample(range(len(train)), len(train))
            out.append(train[order[pos]])
        return out

    def rollout(self, states: Sequence[S], step: int) -> list[SampledGroup]:
        """Step 1: every group the sampler draws for each state, from the current weights; this
        rank samples its share of the states and receives the others' groups, in state order."""
        cfg, key = self.config, self.current.seed_key
        mine: list[SampledGroup] = []
        for k in self.world.part(len(states)):  # k: the state's index in the whole step, which seeds it
            params = self.sampling_params(step_seed(cfg.seed, *key, step, k))
            mine += self.data.sampler.sample(states[k], params, seed=step_seed(cfg.seed, "qa", *key, step, k))
        return [g for part in self.world.gather(mine) for g in part]

    def sampling_params(self, seed: int) -> SamplingParams:
        c = self.config
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_tokens, n=c.group_size, seed=seed)

    # -- the loop --------------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        logged: list[dict[str, Any]] = []
        for index in range(self.stage, len(self.stages)):
            self.stage = index
            if self.step == 0 and not any(e.get("stage", 0) == index for e in self.evals):
                self.start_stage(index)
            if index == 0:
                self.before_training()
            logged += self._train_stage()
            if index + 1 < len(self.stages):
                self.stage, self.step, self.best = index + 1, 0, None
        if self.world.main:
            plot_metrics(self.out / "metrics.jsonl", self.out / "curves.png", (*self.curves, *self.learner.curves))
            if self.config.publish is not None:
                self.publish()
        self.world.barrier()
        return logged

    def start_stage(self, index: int) -> None:
        """0. A later stage warm-starts from the previous stage's best validation checkpoint (not
        its last) with a fresh optimizer; every stage's starting point is its first best candidate,
        so the published adapter is never worse on validation than the one training started from."""
        if index > 0:
            load_checkpoint(self.out / self.stages[index - 1].folder / "best", policy=self.policy, restore_rng=False)
            self.rollouts.sync(self.policy)
            self.optimizer = self.new_optimizer()
        self.best = None
        self._evaluate_and_keep_best()

    def before_training(self) -> None:
        """Runs after stage 0's starting evaluation, before its first step, in fresh and resumed
        runs alike: the supervised warm start, once (``evals`` tell whether it already ran)."""
        if self.config.warm_start_steps and self.step == 0 and not self.warm_started:
            self.warm_start()

    # -- supervised warm start ---------------------------------------------------------------------
    @property
    def warm_started(self) -> bool:
        return any(e.get("phase") == "warm_start" for e in self.evals)

    def warm_start_examples(self) -> list[TeacherExample]:
        """(prompt, target) pairs the warm start learns: the recipe's teacher (none by default)."""
        return []

    def warm_start(self) -> list[dict[str, Any]]:
        """``warm_start_steps`` SFT steps on `warm_start_examples` (`recipes.warm_start`), then
        an evaluation stored as ``{"step": 0, "phase": "warm_start", ...}`` (so a resumed run
        skips it; a better one is the stage's best) and a checkpoint. Losses go to
        ``warm_start.jsonl``; metrics.jsonl stays one row per RL step. Its own optimizer:
        Adam's moments from cross-entropy gradients would otherwise carry into RL's first steps."""
        cfg = self.config
        examples = self.warm_start_examples()
        if not examples:
            raise ValueError(f"warm_start_steps={cfg.warm_start_steps}, but the {self.role} recipe has no teacher reply for any training state")
        prompts = [e.prompt for e in examples]
        targets = [target_ids(self.policy, e.target) for e in examples]
        optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=cfg.warm_start_lr, weight_decay=cfg.weight_decay)
        log = MetricsLog(self.out / "warm_start.jsonl") if self.world.main else None
        rows = []
        batches = warm_start_batches(len(examples), cfg.warm_start_batch_size, cfg.warm_start_steps, cfg.seed)
        for k, batch in enumerate(tqdm(batches, desc=f"warm start {self.role}", disable=not cfg.progress or not self.world.main)):
            started = time.perf_counter()
            loss = sft_step(
                self.policy, optimizer, [prompts[i] for i in batch], [targets[i] for i in batch],
                micro_batch_size=cfg.micro_batch_size, max_grad_norm=cfg.max_grad_norm, world=self.world,
            )  # fmt: skip
            row = {"phase": "warm_start", "step": k + 1, "loss": loss, "examples": len(examples), "seconds": time.perf_counter() - started}
            if log is not None:
                log.write(row)
            rows.append(row)
        self.rollouts.sync(self.policy)
        self._evaluate_and_keep_best(phase="warm_start")
        self.save_checkpoint()
        return rows

    def _train_stage(self) -> list[dict[str, Any]]:
        cfg, stage = self.config, self.current
        label = "".join(f" {k} {v}" for k, v in stage.tags.items())
        bar = tqdm(
            range(self.step, cfg.steps), initial=self.step, total=cfg.steps, desc=f"{self.learner.name}-{self.role}{label}",
            disable=not cfg.progress or not self.world.main,
        )  # fmt: skip
        logged = []
        for step in bar:
            started = time.perf_counter()
            # 1. rollouts: the sampler's groups for each state, from the current weights
            groups = self.rollout(self.states_for(step), step)
            # 2-3. advantages from the scored groups, then the update on them
            learned = self.learner.learn(self.policy, self.optimizer, groups)
            # 4. the next rollouts must come from the updated weights
            self.rollouts.sync(self.policy)
            self.step = step + 1
            # 5. metrics, evaluation, checkpoints
            row = {**stage.tags, **self._metrics_row(groups, learned, time.perf_counter() - started)}
            if (cfg.eval_every and self.step % cfg.eval_every == 0) or self.step == cfg.steps:
                row.update({f"eval_{k}": v for k, v in self._evaluate_and_keep_best().items()})
            if self.world.main:
                self.metrics.write(row)
            logged.append(row)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.3f}" if "kl" in row else ("-" if row["updated"] else "skipped"))
            if self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps:
                self.save_checkpoint()
        return logged

    def _metrics_row(self, groups: Sequence[SampledGroup], learned: Learned, seconds: float) -> dict[str, Any]:
        rewards = torch.tensor([r for g in groups if not g.local for r in g.rewards], dtype=torch.float64)
        samples = [s for g in groups for s in g.samples]
        calls = [c for s in samples for c in s.completions]
        terms = {name for s in samples for name in s.terms}
        return {
            "step": self.step,
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std(correction=0)),
            "zero_variance_fraction": learned.zero_variance_fraction,
            "response_length": sum(len(c.token_ids) for c in calls) / max(1, len(calls)),
            "parse_failure_rate": sum(c.parse_failed for c in calls) / max(1, len(calls)),
            **({"local_groups": sum(g.local for g in groups)} if any(g.local for g in groups) or self.rerolls else {}),
            **{name: sum(s.terms.get(name, 0.0) for s in samples) / len(samples) for name in sorted(terms)},
            **update_metrics(learned.stats),
            "rows": learned.rows,
            "seconds": seconds,
            **learned.extra,
        }

    # -- evaluation and checkpoints ----------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        val = self.current.val
        return self.data.sampler.evaluate(val) if val else {}

    def _evaluate_and_keep_best(self, **tags: Any) -> dict[str, float]:
        """Rank 0 evaluates and every rank receives the result, so all keep the same ``best``."""
        result = self.world.broadcast(self.evaluate() if self.world.main else {})
        self.evals.append({**self.current.tags, "stage": self.stage, "step": self.step, **tags, **result})
        if result and (self.best is None or result["reward"] > self.best["reward"]):
            self.best = {"step": self.step, **result}
            self.save_checkpoint(self.out / self.current.folder / "best", with_optimizer=False)
        return result

    def save_checkpoint(self, path: Path | None = None, *, with_optimizer: bool = True) -> Path:
        """The adapter and the run's position; by default as the current stage's ``last``, the
        checkpoint `setup` resumes from. Rank 0 writes (every rank holds the same weights and
        optimizer state); the others wait until it is on disk."""
        path = path or self.out / self.current.folder / "last"
        if self.world.main:
            save_checkpoint(
                path, policy=self.policy, optimizer=self.optimizer if with_optimizer else None,
                step=self.step, config=self.config.model_dump(mode="json"), modules=self.learner.modules,
                extra={"stage": self.stage, **self.current.tags, "best": self.best, "evals": self.evals},
            )  # fmt: skip
        self.world.barrier()
        return path

    def best_adapter(self) -> Path:
        """The last stage's best validation checkpoint's adapter (its last one when there was no
        validation). The LoRA only: training-only modules (a value head) stay in its trainer.pt."""
        folder = self.out / self.stages[-1].folder
        return (latest_checkpoint(folder / "best") or folder / "last") / "adapter"

    def publish(self) -> list[Any]:
        p = self.config.publish
        assert p is not None
        metrics = {k: v for k, v in (self.best or {}).items() if k != "step"}
        keys = data_hash(self.data.sampler.key(s) for stage in self.stages for s in stage.train)
        # the manifest names the prompt, so a client whose default prompt has moved on since
        # still serves this adapter with the one it learned
        return [
            export_policy(
                self.best_adapter(), p.registry_dir, role=role, version=p.version, base_model=self.config.base_model,
                config=self.config.model_dump(mode="json"), eval_metrics=metrics, training_data_hash=keys, promote=p.promote,
                prompt=prompt,
            )  # fmt: skip
            for role, prompt in self.published_roles().items()
        ]

    def cleanup(self) -> None:
        self.rollouts.backend.close()
        self.world.close()
        del self.policy, self.optimizer
