"""The GRPO recipe skeleton shared by Memory-R1's two agents (manager, answerer).

Both train one policy on single-call prompts: sample a group of n replies per prompt, score
each reply with an environment, normalise rewards within the group, take PPO steps. They
differ only in what a state is and how a reply is scored, which is the `GroupEnv` a
subclass builds in `_setup_data`; `train()` is the same loop for both and reads top to
bottom:

    for step in range(start, steps):
        1. rollouts    prompts_per_step states, n samples each, from the current policy
        2. advantages  GRPO within each group; zero-variance groups dropped (DAPO)
        3. update      ppo_epochs of PPO-clip + KL(k3) to the adapter-free model + entropy
        4. sync        the rollout engine sees the new weights (vLLM: reload the adapter)
        5. log         one JSONL row; eval on validation every eval_every steps; checkpoint

Steps 2 and 3 are one method, ``learn(groups)``: a recipe that learns differently from the
same rollouts overrides only it (`recipes.ppo_manager`: a value head's GAE instead of group
statistics, and its ``_setup_modules`` / ``param_groups`` add the head to the optimizer and
the checkpoints).

torchtune's recipe shape: ``setup`` / ``train`` / ``save_checkpoint`` / ``cleanup``.
"""

from __future__ import annotations

import abc
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import torch

from memsdk.llm.base import SamplingParams

from ..advantages import GroupedAdvantages, grouped_advantages
from ..checkpoint import data_hash, export_policy, latest_checkpoint, load_checkpoint, save_checkpoint
from .config import RecipeConfig
from .metrics import DEFAULT_CURVES, MetricsLog, plot_metrics
from .policy import Policy
from .rollouts import RolloutEngine, rollout_engine
from .update import Row, UpdateStats, ppo_update, update_metrics

__all__ = ["start_run", "Sampled", "SampledGroup", "GroupEnv", "RecipeData", "Learned", "GRPORecipe", "step_seed"]

S = TypeVar("S")
S_in = TypeVar("S_in", contravariant=True)  # an env only takes states in


@dataclass(frozen=True)
class Sampled:
    token_ids: tuple[int, ...]
    text: str  # the whole reply as the runtime would parse it (response prefix included)
    reward: float
    parse_failed: bool = False
    #: the prompt this reply was sampled from when the group's replies do not share one (a
    #: Mem-alpha step t > 1: each rollout reached it with its own memory); None: the group's
    prompt: str | None = None


@dataclass(frozen=True)
class SampledGroup:
    key: str
    prompt: str  # rendered: exactly the text generation started from
    samples: tuple[Sampled, ...]

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]


class GroupEnv(Protocol[S_in]):
    def sample(self, state: S_in, params: SamplingParams, *, seed: int) -> SampledGroup:
        """params.n replies to one state, each scored."""
        ...

    def evaluate(self, states: Sequence[S_in]) -> dict[str, float]:
        """Greedy replies of the current policy on held-out states -> metrics (key "reward" required)."""
        ...

    def key(self, state: S_in) -> str: ...


@dataclass(frozen=True)
class RecipeData(Generic[S]):
    env: GroupEnv[S]
    train: Sequence[S]
    val: Sequence[S]


class Learned(NamedTuple):
    """What one step's learning (`GRPORecipe.learn`) reports to the metrics row."""

    stats: UpdateStats | None  # None: no update ran this step
    rows: int  # rows the update saw
    zero_variance_fraction: float  # groups whose rewards were all equal
    extra: dict[str, float]  # the recipe's own metrics (PPO: value_loss, explained_variance)


def start_run(config: RecipeConfig, out: Path) -> Policy:
    """Seed Python and torch from the config, create the output folder, load the policy.

    Seeding comes first: LoRA's initial A matrices are drawn when the policy is built.
    """
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    out.mkdir(parents=True, exist_ok=True)
    return Policy.from_config(config)


def step_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed for one call, from the run seed and where in the run the call is."""
    return random.Random(":".join(map(str, (seed, *parts)))).getrandbits(31)


class GRPORecipe(abc.ABC, Generic[S]):
    role: str = "manager"
    algorithm: str = "grpo"
    curves: tuple[str, ...] = DEFAULT_CURVES  # drawn into curves.png

    def __init__(self, config: RecipeConfig) -> None:
        self.config = config
        self.out = Path(config.output_dir)
        self.step = 0
        self.best: dict[str, float] | None = None
        self.evals: list[dict[str, Any]] = []  # metrics, and the tags of `_evaluate_and_keep_best` (phase="warm_start")

    # -- setup -----------------------------------------------------------------------------------
    @abc.abstractmethod
    def _setup_data(self, policy: Policy, rollouts: RolloutEngine) -> RecipeData[S]:
        """Build the environment and the train / validation states."""

    def _setup_modules(self, policy: Policy) -> dict[str, torch.nn.Module]:
        """Training-only modules beside the LoRA (none for GRPO): checkpointed, never published."""
        return {}

    def param_groups(self) -> list[dict[str, Any]]:
        """What the optimizer steps: the LoRA weights (plus, in a subclass, its training-only modules)."""
        return [{"params": self.policy.trainable_parameters()}]

    def setup(self) -> None:
        cfg = self.config
        self.policy = start_run(cfg, self.out)
        self.modules = self._setup_modules(self.policy)
        self.optimizer = torch.optim.AdamW(self.param_groups(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.rollouts = rollout_engine(cfg, self.policy, self.out)
        self.data = self._setup_data(self.policy, self.rollouts)
        if not self.data.train:
            raise ValueError("no training states")
        if (last := latest_checkpoint(self.out / "checkpoints" / "last")) is not None:
            state = load_checkpoint(last, policy=self.policy, optimizer=self.optimizer, modules=self.modules)
            self.step, self.best, self.evals = state.step, state.extra.get("best"), state.extra.get("evals", [])
            self.rollouts.sync(self.policy)
        self.metrics = MetricsLog(self.out / "metrics.jsonl", resume_step=self.step)

    # -- one step's pieces ---------------------------------------------------------------------
    def states_for(self, step: int) -> list[S]:
        """prompts_per_step states; epoch e visits the train set in a seeded permutation of its own,
        so a resumed run continues with exactly the states the interrupted one would have used."""
        train, k = self.data.train, self.config.prompts_per_step
        out = []
        for i in range(step * k, (step + 1) * k):
            epoch, pos = divmod(i, len(train))
            order = random.Random(f"{self.config.seed}:epoch:{epoch}").sample(range(len(train)), len(train))
            out.append(train[order[pos]])
        return out

    def rollout(self, states: Sequence[S], step: int) -> list[SampledGroup]:
        """Step 1: one group per state (a recipe whose state yields several groups, one per
        write step, overrides it: `recipes.grpo_writer`)."""
        cfg, env = self.config, self.data.env
        return [env.sample(s, self.sampling_params(step_seed(cfg.seed, step, k)), seed=step_seed(cfg.seed, "qa", step, k)) for k, s in enumerate(states)]

    def sampling_params(self, seed: int) -> SamplingParams:
        c = self.config
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_tokens, n=c.group_size, seed=seed)

    def advantages(self, groups: Sequence[SampledGroup]) -> GroupedAdvantages:
        """A_i = (R_i - mean R) / (std R + eta) per group (Dr.GRPO without the std)."""
        return grouped_advantages([g.rewards for g in groups], scale_by_std=self.config.scale_by_std)

    def rows(self, groups: Sequence[SampledGroup], adv: GroupedAdvantages) -> list[Row]:
        out = []
        for a, g_idx, m_idx in zip(adv.advantages.tolist(), adv.group_index.tolist(), adv.member_index.tolist()):
            if self.config.drop_zero_variance and not adv.keep[g_idx]:
                continue
            group, sample = groups[g_idx], groups[g_idx].samples[m_idx]
            out.append(Row(sample.prompt or group.prompt, sample.token_ids, a))
        return out

    def learn(self, groups: Sequence[SampledGroup]) -> Learned:
        """Steps 2 + 3: group-relative advantages, then PPO epochs on the rows.

        Groups whose rewards are all equal carry no signal and are dropped (DAPO); when every
        group was uniform there is nothing to learn from and the weights stay as they are.
        """
        adv = self.advantages(groups)
        rows = self.rows(groups, adv)
        stats = ppo_update(self.policy, self.optimizer, rows, self.config)
        return Learned(stats, len(rows), float((~adv.keep).double().mean()), {})

    # -- the loop --------------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        from tqdm import tqdm

        cfg = self.config
        if self.step == 0 and not self.evals:
            self.evals.append({"step": 0, **self.evaluate()})  # the baseline every later eval is compared to
        self.before_training()
        bar = tqdm(range(self.step, cfg.steps), initial=self.step, total=cfg.steps, desc=f"{self.algorithm}-{self.role}", disable=not cfg.progress)
        rows_logged = []
        for step in bar:
            started = time.perf_counter()
            # 1. rollouts: a group of n replies per state, sampled from the current weights
            groups = self.rollout(self.states_for(step), step)
            # 2-3. advantages from the scored groups, then PPO epochs on them
            learned = self.learn(groups)
            # 4. the next rollouts must come from the updated weights
            self.rollouts.sync(self.policy)
            self.step = step + 1
            # 5. metrics, evaluation, checkpoints
            row = self._metrics_row(groups, learned, time.perf_counter() - started)
            if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                row.update({f"eval_{k}": v for k, v in self._evaluate_and_keep_best().items()})
            if self.step == cfg.steps:
                row.update({f"eval_{k}": v for k, v in self._evaluate_and_keep_best().items()})
            self.metrics.write(row)
            rows_logged.append(row)
            bar.set_postfix(reward=f"{row['reward_mean']:.2f}", kl=f"{row['kl']:.3f}" if "kl" in row else ("-" if row["updated"] else "skipped"))
            if self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps:
                self.save_checkpoint()
        plot_metrics(self.out / "metrics.jsonl", self.out / "curves.png", self.curves)
        if cfg.publish is not None:
            self.publish()
        return rows_logged

    def _metrics_row(self, groups: Sequence[SampledGroup], learned: Learned, seconds: float) -> dict[str, Any]:
        rewards = torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float64)
        samples = [s for g in groups for s in g.samples]
        return {
            "step": self.step,
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std(correction=0)),
            "zero_variance_fraction": learned.zero_variance_fraction,
            "response_length": sum(len(s.token_ids) for s in samples) / len(samples),
            "parse_failure_rate": sum(s.parse_failed for s in samples) / len(samples),
            **update_metrics(learned.stats),
            "rows": learned.rows,
            "seconds": seconds,
            **learned.extra,
        }

    def before_training(self) -> None:
        """Runs after the baseline evaluation, before the first step, in fresh and resumed runs alike
        (a subclass's warm start; it must tell from the checkpoint whether it already ran)."""

    # -- evaluation and checkpoints ----------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        return self.data.env.evaluate(self.data.val) if self.data.val else {}

    def _evaluate_and_keep_best(self, **tags: Any) -> dict[str, float]:
        result = self.evaluate()
        self.evals.append({"step": self.step, **tags, **result})
        if result and (self.best is None or result["reward"] > self.best["reward"]):
            self.best = {"step": self.step, **result}
            self.save_checkpoint(self.out / "checkpoints" / "best")
        return result

    def save_checkpoint(self, path: Path | None = None) -> Path:
        return save_checkpoint(
            path or self.out / "checkpoints" / "last", policy=self.policy, optimizer=self.optimizer, step=self.step,
            config=self.config.model_dump(mode="json"), extra={"best": self.best, "evals": self.evals}, modules=self.modules,
        )  # fmt: skip

    def best_adapter(self) -> Path:
        """The best validation checkpoint's adapter (the last one when there was no validation).

        The LoRA only: training-only modules (a value head) stay in the checkpoint's trainer.pt.
        """
        best = latest_checkpoint(self.out / "checkpoints" / "best")
        return (best or self.out / "checkpoints" / "last") / "adapter"

    def trained_prompt(self) -> str | None:
        """The prompt id (e.g. ``manager/v3``) the policy was trained with; None: the role's default."""
        return None

    def publish(self) -> Any:
        p = self.config.publish
        assert p is not None
        metrics = {k: v for k, v in (self.best or {}).items() if k != "step"}
        # the manifest names the prompt, so a client whose default prompt has moved on since
        # still serves this adapter with the one it learned
        return export_policy(
            self.best_adapter(), p.registry_dir, role=self.role, version=p.version, base_model=self.config.base_model,
            config=self.config.model_dump(mode="json"), eval_metrics=metrics,
            training_data_hash=data_hash(self.data.env.key(s) for s in self.data.train), promote=p.promote,
            prompt=self.trained_prompt(),
        )  # fmt: skip

    def cleanup(self) -> None:
        self.rollouts.backend.close()
        del self.policy, self.optimizer
