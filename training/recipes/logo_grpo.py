"""Memory-R2 trained with LoGo-GRPO: one backbone for extractor + manager, session rewards,
global and local groups, step-level ratio, and a session-length curriculum.

Per optimisation step, on one episode of T sessions (a LoCoMo conversation cut to the
current stage's length):

    1. global   n full rollouts (EpisodeRunner.group: one QA subset per session, shared);
                group g_t = session t's reward R_t across the n rollouts
    2. local    for each session t, with probability p_local: pick an anchor rollout, restore
                its memory as it was before S_t, re-run S_t m times AT THE TRAINING
                TEMPERATURE (EpisodeRunner.reroll refuses greedy: identical re-rolls carry no
                signal); group l_t = the m re-rolls' rewards
    3. advantages  each group normalised on its own (`logo_advantages`), never across
    4. rows     every extractor / manager call of a session outcome is one step and takes
                that outcome's advantage
    5. update   PPO with the step-level ratio rho_u = exp(mean log-ratio over the step's
                tokens), dual clip c = 3, log-ratio cap 3, KL k3 to the adapter-free model,
                entropy bonus, step-mean aggregation (the config's defaults)

Curriculum: ``curriculum = (8, 16, 32)`` runs ``steps`` steps per stage on episodes of that
many sessions; each stage starts from the previous stage's best validation checkpoint (not
its last one) with a fresh optimizer. Validation: greedy rollouts of the held-out episodes,
mean session reward (``reward``) and QA F1.

Resume: every ``checkpoint_every`` steps and at its end a stage saves ``stage-<i>-<n>/last``
(adapter, optimizer, RNG, the step within the stage and the stage's best validation so far).
`setup` continues from the newest one: inside that stage, or at the next stage's warm start
when it had finished. Seeds, episodes and evaluations depend only on (stage, step), so a
killed and resumed run writes the same rows and weights as an unbroken one.

The published adapter serves both roles (one backbone): it is exported as ``extractor`` and
``manager``, each manifest naming the r2 prompt that role was trained with, so a client
serves the adapter with that prompt instead of its Memory-R1 default.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memsdk.embedding import Embedder
from memsdk.llm.base import SamplingParams
from memsdk.policies import Answerer, PolicyConfig

from ..advantages import LogoAdvantages, LogoGroup, logo_advantages
from ..checkpoint import data_hash, export_policy, latest_checkpoint, load_checkpoint, save_checkpoint
from ..env import Episode, EpisodeConfig, EpisodeRollout, EpisodeRunner, SessionOutcome, locomo_episode
from ..rewards import SessionRewardConfig
from .config import LogoGRPOConfig
from .grpo import start_run, step_seed
from .grpo_manager import frozen_answerer, make_embedder
from .metrics import MetricsLog, plot_metrics
from .rollouts import rollout_engine
from .update import Row, UpdateStats, ppo_update, update_metrics

__all__ = ["LogoStep", "LogoGRPORecipe"]


@dataclass(frozen=True)
class LogoStep:
    """What one step sampled, kept for metrics and inspection."""

    rollouts: tuple[EpisodeRollout, ...]
    groups: tuple[LogoGroup, ...]
    members: tuple[tuple[SessionOutcome, ...], ...]  # members[k][i]: the outcome behind groups[k].rewards[i]
    advantages: LogoAdvantages


class LogoGRPORecipe:
    role = "manager"

    def __init__(self, config: LogoGRPOConfig) -> None:
        self.config = config
        self.out = Path(config.output_dir)
        self.stage_starts: list[Path | None] = []  # the checkpoint each stage warm-started from
        self.last_step: LogoStep | None = None
        # the run's position: stage_step steps of curriculum stage `stage` are done
        self.stage, self.stage_step = 0, 0
        self.stage_best: dict[str, float] = {}  # the stage's best validation so far
        self.optimizer: torch.optim.Optimizer | None = None

    # -- setup -------------------------------------------------------------------------------
    def _components(self) -> tuple[Embedder, Answerer]:
        return make_embedder(self.config.embedder), frozen_answerer(self.config.answerer, self.rollouts)

    def episodes(self, sessions: int) -> tuple[list[Episode], list[Episode]]:
        """Train and validation episodes of the stage: the first ``sessions`` sessions."""
        cfg = self.config
        return [locomo_episode(i, max_sessions=sessions) for i in cfg.train_ids], [locomo_episode(i, max_sessions=sessions) for i in cfg.val_ids]

    def setup(self) -> None:
        cfg = self.config
        self.policy = start_run(cfg, self.out)
        self.rollouts = rollout_engine(cfg, self.policy, self.out)
        self.embedder, self.answerer = self._components()
        episode_config = EpisodeConfig(
            chunk_turns=cfg.chunk_turns, related_k=cfg.related_k, answer_k=cfg.answer_k, qa_per_session=cfg.qa_per_session,
            reward=SessionRewardConfig(alpha=cfg.alpha, lambda_comp=cfg.lambda_comp),
        )  # fmt: skip

        def runner(params: SamplingParams) -> EpisodeRunner:
            # one model name for both roles; unconstrained and never re-asked, as in ManagerGRPORecipe
            policy = PolicyConfig(model=self.rollouts.model, params=params, constrained=False, reask=False)
            return EpisodeRunner(self.rollouts.backend, self.answerer, self.embedder, policy, episode_config)

        self.runner = runner(SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed))
        self.eval_runner = runner(SamplingParams(temperature=0.0, max_tokens=cfg.max_tokens))
        self._resume()
        # rows past the checkpoint were written by the killed run and are about to be redone
        self.metrics = MetricsLog(self.out / "metrics.jsonl", keep=lambda r: (r["stage"], r["step"]) <= (self.stage, self.stage_step))

    def _stage_dir(self, stage: int) -> Path:
        return self.out / f"stage-{stage}-{self.config.curriculum[stage]}"

    def _warm_start_source(self, stage: int) -> Path | None:
        return None if stage == 0 else self._stage_dir(stage - 1) / "best"

    def _resume(self) -> None:
        """Continue from the newest stage ``last`` checkpoint, if any.

        A finished stage leaves the position at the next stage's start, whose warm start then
        runs as in an unbroken run; an unfinished one restores its optimizer and RNG too, and
        its warm start (already in the saved weights) is not repeated.
        """
        cfg = self.config
        for stage in reversed(range(len(cfg.curriculum))):
            last = latest_checkpoint(self._stage_dir(stage) / "last")
            if last is None:
                continue
            self.optimizer = self._new_optimizer()
            state = load_checkpoint(last, policy=self.policy, optimizer=self.optimizer)
            self.rollouts.sync(self.policy)
            self.stage_starts = [self._warm_start_source(s) for s in range(stage + 1)]
            if state.step >= cfg.steps:
                self.stage, self.stage_step, self.optimizer = stage + 1, 0, None
            else:
                self.stage, self.stage_step, self.stage_best = stage, state.step, state.extra["eval"]
            return

    def _new_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.policy.trainable_parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)

    # -- one step ------------------------------------------------------------------------------
    def sample(self, episode: Episode, seed: int) -> LogoStep:
        cfg = self.config
        # 1. global groups: n full rollouts; session t's rewards across them form one group
        rollouts = tuple(self.runner.group(episode, cfg.group_size, seed=seed))
        sessions = range(len(episode.sessions))
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
        # 3. each group normalised on its own
        return LogoStep(rollouts, tuple(groups), tuple(members), logo_advantages(groups))

    def rows(self, step: LogoStep) -> list[Row]:
        """4. every call of an outcome is one step of the step-level ratio, with the outcome's advantage."""
        adv = step.advantages
        out = []
        for a, g, i in zip(adv.advantages.tolist(), adv.group_index.tolist(), adv.member_index.tolist()):
            if self.config.drop_zero_variance and not adv.keep[g]:
                continue
            out += [Row(self.policy.render(c.messages), tuple(c.token_ids), a) for c in step.members[g][i].calls if c.token_ids]
        return out

    # -- the loop --------------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        cfg = self.config
        logged: list[dict[str, Any]] = []
        for stage in range(self.stage, len(cfg.curriculum)):
            train_eps, val_eps = self.episodes(cfg.curriculum[stage])
            if self.stage_step == 0:
                self._start_stage(stage, val_eps)
            logged += self._train_stage(stage, train_eps, val_eps)
            self.stage, self.stage_step = stage + 1, 0
        self.final_best = self._stage_dir(len(cfg.curriculum) - 1) / "best"
        plot_metrics(self.out / "metrics.jsonl", self.out / "curves.png")
        if cfg.publish is not None:
            self.publish()
        return logged

    def _start_stage(self, stage: int, val_eps: Sequence[Episode]) -> None:
        """Warm start from the previous stage's best validation checkpoint, fresh optimizer; the
        starting point is the stage's first best candidate."""
        source = self._warm_start_source(stage)
        if source is not None:
            load_checkpoint(source, policy=self.policy, restore_rng=False)
            self.rollouts.sync(self.policy)
        self.stage_starts.append(source)
        self.optimizer = self._new_optimizer()
        self.stage_best = self._evaluate(val_eps)
        self.save_checkpoint(self._stage_dir(stage) / "best", with_optimizer=False)

    def _train_stage(self, stage: int, train_eps: Sequence[Episode], val_eps: Sequence[Episode]) -> list[dict[str, Any]]:
        from tqdm import tqdm

        cfg, optimizer = self.config, self.optimizer
        assert optimizer is not None
        n_sessions = cfg.curriculum[stage]
        logged = []
        bar = tqdm(range(self.stage_step, cfg.steps), initial=self.stage_step, total=cfg.steps, desc=f"logo-grpo {n_sessions} sessions", disable=not cfg.progress)
        for step in bar:
            started = time.perf_counter()
            sampled = self.sample(train_eps[step % len(train_eps)], step_seed(cfg.seed, stage, step))
            rows = self.rows(sampled)
            stats = ppo_update(self.policy, optimizer, rows, cfg)
            self.rollouts.sync(self.policy)
            self.last_step, self.stage_step = sampled, step + 1
            row = {"stage": stage, "sessions": n_sessions, **self._metrics_row(step + 1, sampled, stats, len(rows), time.perf_counter() - started)}
            if (cfg.eval_every and self.stage_step % cfg.eval_every == 0) or self.stage_step == cfg.steps:
                result = self._evaluate(val_eps)
                row.update({f"eval_{k}": v for k, v in result.items()})
                if result["reward"] > self.stage_best["reward"]:
                    self.stage_best = result
                    self.save_checkpoint(self._stage_dir(stage) / "best", with_optimizer=False)
            self.metrics.write(row)
            logged.append(row)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}")
            if self.stage_step % cfg.checkpoint_every == 0 or self.stage_step == cfg.steps:
                self.save_checkpoint()
        return logged

    def _metrics_row(self, step: int, sampled: LogoStep, stats: UpdateStats | None, n_rows: int, seconds: float) -> dict[str, Any]:
        rewards = torch.tensor([r for g in sampled.groups if g.branch == "global" for r in g.rewards], dtype=torch.float64)
        calls = [c for members in sampled.members for o in members for c in o.calls]
        return {
            "step": step,
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std(correction=0)),
            "zero_variance_fraction": float((~sampled.advantages.keep).double().mean()),
            "local_groups": sum(g.branch == "local" for g in sampled.groups),
            "response_length": sum(len(c.token_ids or ()) for c in calls) / max(1, len(calls)),
            "parse_failure_rate": sum(c.failure is not None for c in calls) / max(1, len(calls)),
            **update_metrics(stats),
            "rows": n_rows,
            "seconds": seconds,
        }

    def _evaluate(self, episodes: Sequence[Episode]) -> dict[str, float]:
        outcomes = [o for e in episodes for o in self.eval_runner.rollout(e, tag="eval").sessions]
        n = max(1, len(outcomes))
        return {"reward": sum(o.reward for o in outcomes) / n, "qa_f1": sum(o.qa_f1 for o in outcomes) / n, "compression": sum(o.compression for o in outcomes) / n}

    # -- checkpoints and export --------------------------------------------------------------------
    def save_checkpoint(self, path: Path | None = None, *, with_optimizer: bool = True) -> Path:
        """The adapter and the run's position (stage, step within it, the stage's best so far);
        by default as the current stage's ``last``, the checkpoint `setup` resumes from."""
        cfg = self.config
        return save_checkpoint(
            path or self._stage_dir(self.stage) / "last", policy=self.policy, optimizer=self.optimizer if with_optimizer else None,
            step=self.stage_step, config=cfg.model_dump(mode="json"),
            extra={"stage": self.stage, "sessions": cfg.curriculum[self.stage], "eval": self.stage_best},
        )  # fmt: skip

    def publish(self) -> list[Any]:
        p, cfg = self.config.publish, self.config
        assert p is not None and self.final_best is not None and latest_checkpoint(self.final_best) is not None
        metrics = torch.load(self.final_best / "trainer.pt", weights_only=False)["extra"]["eval"]
        keys = data_hash(f"{i}:{cfg.curriculum}" for i in cfg.train_ids)
        return [
            export_policy(
                self.final_best / "adapter", p.registry_dir, role=role, version=p.version, base_model=cfg.base_model,
                config=cfg.model_dump(mode="json"), eval_metrics=metrics, training_data_hash=keys, promote=p.promote,
                prompt=prompt,
            )  # fmt: skip
            for role, prompt in self.runner.prompt_ids().items()
        ]

    def cleanup(self) -> None:
        self.rollouts.backend.close()
        del self.policy
