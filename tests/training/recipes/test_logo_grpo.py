"""LoGo-GRPO on a tiny model that speaks the Memory-R2 reply formats: local groups re-roll from
the anchor's restored memory, differ from each other, are normalised on their own, a
curriculum stage starts from the previous stage's best validation checkpoint, a killed run
resumes inside its stage, and the published adapter names the r2 prompts it was trained with."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memsdk.embedding import HashEmbedder
from memsdk.policies import ExtractiveAnswerer
from memsdk.registry import PolicyRegistry
from memsdk.types import Scope, Turn
from memsdk_training.advantages import grpo_advantages
from memsdk_training.env import Episode, QAItem, Session
from memsdk_training.recipes import LogoGRPOConfig, PublishSettings, Sampled, SampledGroup, read_metrics
from memsdk_training.recipes.logo_grpo import LogoGRPORecipe

from ._tiny import make_format_model

# the first chunk holds every word the tiny model writes, so the facts it extracts there are
# found in the turns and stored (the ingest loop drops a fact no shown turn holds)
SESSIONS = [
    [("alice", "alice likes tea in paris"), ("bob", "bob has a dog and a cat"), ("alice", "alice likes paris")],
    [("bob", "bob has a cat"), ("alice", "alice likes the dog")],
    [("alice", "alice has a cat in paris"), ("bob", "bob likes tea")],
]
QUESTIONS = [[QAItem("what does alice like", "tea"), QAItem("what does bob have", "dog")], [QAItem("what does bob have now", "cat")], [QAItem("where is alice", "paris")]]


def episode(n_sessions: int, key: str) -> Episode:
    sessions = tuple(
        Session(f"{key}/s{i}", tuple(Turn(speaker=s, text=t, turn_id=f"D{i}:{j}") for j, (s, t) in enumerate(turns)), tuple(QUESTIONS[i]))
        for i, turns in enumerate(SESSIONS[:n_sessions])
    )
    return Episode(key, Scope(user_id="u", run_id=key), sessions)


class TinyLogo(LogoGRPORecipe):
    """Synthetic episodes, a hash embedder, the extractive answerer; validation scores scripted
    by (stage, steps done in it) so that the best checkpoint is known (and is not the last one)
    in stage 0, and a resumed run is scored as the unbroken one."""

    SCRIPT = {0: [0.0, 0.5, 0.1, 0.2, 0.3], 1: [0.0, 0.2, 0.1, 0.4, 0.3]}

    def __init__(self, config: LogoGRPOConfig) -> None:
        super().__init__(config)
        self.start_weights: list[dict[str, torch.Tensor]] = []

    def _components(self, rollouts):  # type: ignore[no-untyped-def]
        return HashEmbedder(64), ExtractiveAnswerer()

    def episodes(self, sessions: int):  # type: ignore[no-untyped-def]
        return [episode(sessions, "train")], [episode(sessions, "val")]

    def start_stage(self, index):  # type: ignore[no-untyped-def]
        super().start_stage(index)
        self.start_weights.append(self.policy.adapter_state())  # right after the warm start

    def evaluate(self):  # type: ignore[no-untyped-def]
        return {**super().evaluate(), "reward": self.SCRIPT[self.stage][self.step]}


class Killed(Exception):
    pass


class KilledLogo(TinyLogo):
    """Dies when about to sample the step after ``at`` = (stage, steps done in it), as a killed process would."""

    def __init__(self, config: LogoGRPOConfig, at: tuple[int, int]) -> None:
        super().__init__(config)
        self.at = at

    def rollout(self, states, step):  # type: ignore[no-untyped-def]
        if (self.stage, self.step) == self.at:
            raise Killed
        return super().rollout(states, step)


@pytest.fixture(scope="module")
def format_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    return make_format_model(tmp_path_factory.mktemp("fmt") / "model")


def records(snapshot) -> list[tuple[str, int, bool]]:  # type: ignore[no-untyped-def]
    return sorted((r.text, r.version, r.deleted) for r in snapshot.records(include_deleted=True))


def test_logo_groups_and_curriculum_warm_start(format_model_dir: Path, tmp_path: Path) -> None:
    # a large lr collapses the tiny model's replies to one string by the last step, and re-rolls
    # that cannot differ test nothing: at 5e-2 seeds 0-4 kept 3 of 3 local groups diverse on
    # three seeds before facts had to be found in the turns, on none after; at 2e-2 on all five
    config = LogoGRPOConfig(
        model_path=str(format_model_dir), output_dir=str(tmp_path), num_threads=1, progress=False, seed=0,
        curriculum=(2, 3), steps=2, eval_every=1, group_size=3, rerolls=3, p_local=1.0, chunk_turns=2, max_tokens=10,
        temperature=1.0, lr=2e-2, ppo_epochs=1, qa_per_session=None,
        publish=PublishSettings(registry_dir=str(tmp_path / "registry"), version="r2-1"),
    )  # fmt: skip
    recipe = TinyLogo(config)
    recipe.setup()
    recipe.train()

    step = recipe.data.sampler.last
    assert step is not None
    local = [(k, g) for k, g in enumerate(step.groups) if g.branch == "local"]
    assert [g.session for _, g in local] == [0, 1, 2]  # p_local = 1: one local group per session
    for k, group in local:
        members = step.members[k]
        anchor_state = step.rollouts[group.anchor].sessions[group.session].before
        # built from the anchor's memory as it was before the session
        assert all(records(m.before) == records(anchor_state) for m in members)
        # sampled at the training temperature: the re-rolls did not all write the same replies
        assert len({tuple(c.raw_output for c in m.calls) for m in members}) > 1
    assert any(records(step.rollouts[g.anchor].sessions[1].before) for _, g in local if g.session == 1)  # a non-trivial anchor

    # each group normalised on its own: its advantages are GRPO over its rewards alone. Whether
    # the tiny model's groups have reward variance depends on the CPU's numerics, so a group
    # that has it by construction is normalised beside them, and the path cannot go untested
    rewards = [tuple(g.rewards) for g in step.groups] + [(0.0, 1.0, 0.5)]
    adv = recipe.learner.advantages([SampledGroup(str(k), tuple(Sampled(r, ()) for r in rs)) for k, rs in enumerate(rewards)])
    for k, rs in enumerate(rewards):
        mine = adv.advantages[adv.group_index == k]
        expected = grpo_advantages(list(rs)) if adv.keep[k] else torch.zeros(len(rs))
        torch.testing.assert_close(mine, expected.to(mine.dtype))
    assert adv.keep[len(step.groups)] and not any(adv.keep[k] for k, rs in enumerate(rewards) if len(set(rs)) == 1)

    # the curriculum: stage 1 starts from stage 0's best checkpoint (step 1), not from its last (step 2)
    stage0 = tmp_path / "stage-0-2"
    assert torch.load(stage0 / "best" / "trainer.pt", weights_only=False)["step"] == 1
    best = load_file(str(stage0 / "best" / "adapter" / "adapter_model.safetensors"))
    last = load_file(str(stage0 / "last" / "adapter" / "adapter_model.safetensors"))
    start = {k.replace(".default", ""): v for k, v in recipe.start_weights[1].items()}
    assert set(start) == set(best)
    assert all(torch.equal(start[k], best[k]) for k in best)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["stage"], r["step"]) for r in rows] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    # best and last differ exactly when stage 0's second step updated (whether its groups had
    # reward variance depends on the CPU's numerics): then the start is provably not the last
    assert any(not torch.equal(best[k], last[k]) for k in best) == rows[1]["updated"]

    assert all(r["local_groups"] >= 1 and 0 <= r["parse_failure_rate"] <= 1 for r in rows)

    # one adapter, two roles: each manifest names the prompt that role rendered in training
    registry = PolicyRegistry(tmp_path / "registry")
    assert {role: registry.get(role, "r2-1").prompt for role in ("extractor", "manager")} == {"extractor": "r2_extractor/v2", "manager": "r2_manager/v2"}


def _resume_config(model: Path, out: Path) -> LogoGRPOConfig:
    return LogoGRPOConfig(
        model_path=str(model), output_dir=str(out), num_threads=1, progress=False, seed=5, curriculum=(1, 2), steps=4,
        eval_every=1, checkpoint_every=2, group_size=2, rerolls=2, p_local=0.5, chunk_turns=2, max_tokens=10,
        temperature=1.0, lr=5e-2, ppo_epochs=1, qa_per_session=None,
    )  # fmt: skip


def _trained(recipe: TinyLogo) -> TinyLogo:
    recipe.setup()
    recipe.train()
    return recipe


@pytest.fixture(scope="module")
def unbroken(format_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TinyLogo:
    return _trained(TinyLogo(_resume_config(format_model_dir, tmp_path_factory.mktemp("unbroken"))))


def _without_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.mark.parametrize(
    ("killed_at", "resumes_at", "warm_starts"),
    [
        ((1, 3), (1, 2), 0),  # inside stage 1, one step past its checkpoint at step 2: that step is redone
        ((1, 1), (1, 0), 1),  # before stage 1's first checkpoint: stage 1 starts again, warm start and all
    ],
)
def test_a_killed_curriculum_run_resumes_where_it_stopped(
    format_model_dir: Path, tmp_path: Path, unbroken: TinyLogo, killed_at: tuple[int, int], resumes_at: tuple[int, int], warm_starts: int
) -> None:
    config = _resume_config(format_model_dir, tmp_path)
    with pytest.raises(Killed):
        _trained(KilledLogo(config, at=killed_at))

    resumed = TinyLogo(config)
    resumed.setup()
    assert (resumed.stage, resumed.step) == resumes_at
    tail = resumed.train()
    assert [(r["stage"], r["step"]) for r in tail] == [(1, s) for s in range(resumes_at[1] + 1, 5)]  # stage 0 is not run again
    assert len(resumed.start_weights) == warm_starts  # a stage's warm start happens once, even across the kill

    assert _without_time(read_metrics(tmp_path / "metrics.jsonl")) == _without_time(read_metrics(unbroken.out / "metrics.jsonl"))
    for name, weight in unbroken.policy.adapter_state().items():
        torch.testing.assert_close(resumed.policy.adapter_state()[name], weight, rtol=1e-5, atol=1e-6)
    # stage 1's best is step 3, the step the first case redoes: found again against the restored best-so-far
    best = [torch.load(r.out / "stage-1-2" / "best" / "trainer.pt", weights_only=False) for r in (resumed, unbroken)]
    assert [(b["step"], b["extra"]["best"]["reward"]) for b in best] == [(3, 0.4)] * 2
