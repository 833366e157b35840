"""Retraining as one command: judged answers from the log -> train -> publish -> gate -> promote.

The gate's verdict is fixed by construction where it must be: a scripted backend answers with
the name of the adapter a request was routed to, and the gold of every judged answer is what
the "good" adapter says. The real training path runs once on a tiny model, where only what
holds whatever the numerics is asserted (a decision recorded, promotion iff it passed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from memsdk import InvalidInput, MemoryClient
from memsdk.cli import main as memsdk_cli
from memsdk.embedding import HashEmbedder
from memsdk.gate import AnswerCase, log_answer_cases
from memsdk.llm import TransformersBackend
from memsdk_training.retrain import Job, RetrainConfig, retrain, split_states

from ..client.test_policy_swap import AdapterBackend, publish
from .recipes._tiny import make_format_model

SAM = {"user_id": "sam"}


def judged_log(client: MemoryClient, n: int, gold: str) -> None:
    """An app's traffic: two memories, ``n`` answers each given ``gold`` as feedback, and one
    answer only called wrong (no gold: no state)."""
    client.add("Sam has a dog named Rex", scope=SAM)
    client.add("Sam lives in Lisbon", scope=SAM)
    for i in range(n):
        client.feedback(client.answer(f"what is the name of Sam's dog ({i})?", scope=SAM).trajectory_id, gold=gold)
    client.feedback(client.answer("anything else?", scope=SAM).trajectory_id, correct=False)


def publishing(version_seen: list[Job], role: str = "answerer") -> Any:
    """A trainer that "trains" by publishing an adapter under the job's version (test_policy_swap's `publish`)."""

    def run(job: Job) -> dict[str, Any]:
        version_seen.append(job)
        publish(job.registry_dir, role, job.version)
        return {"steps": 0}

    return run


@pytest.fixture
def app(tmp_path: Path):
    with MemoryClient(data_dir=tmp_path / "app", embedder=HashEmbedder(64), backend=AdapterBackend()) as client:
        judged_log(client, 12, gold="answerer-good")
        yield client


def test_split_is_seeded_exact_and_leaves_both_sides_a_state() -> None:
    def case(i: int) -> AnswerCase:
        return AnswerCase(f"log/{i}", "q", (), "g")

    states = [case(i) for i in range(40)]
    train, held = split_states(states, 0.3, seed=0)
    assert {c.key for c in train} | {c.key for c in held} == {c.key for c in states} and not {c.key for c in train} & {c.key for c in held}
    assert len(held) == 12 and [c.key for c in train] == [c.key for c in states if c not in held]  # log order kept
    assert split_states(states[::-1], 0.3, seed=0)[1] == held[::-1]  # the same states whatever their order
    assert split_states(states, 0.3, seed=1) != (train, held)
    assert [len(side) for side in split_states(states[:2], 0.01)] == [1, 1] == [len(side) for side in split_states(states[:2], 0.99)]


def test_a_candidate_that_beats_the_incumbent_on_held_out_answers_serves(app: MemoryClient) -> None:
    jobs: list[Job] = []
    result = retrain(app, RetrainConfig(version="good"), trainer=publishing(jobs))
    [job] = jobs
    assert result.train_states == len(job.train) and result.train_states + result.held_out_states == 12
    assert job.val == job.train  # the best checkpoint is picked on training states: the held-out ones are the gate's alone
    train, held = split_states(log_answer_cases(app.log, app.bank), 0.3)
    assert list(job.train) == train and len(held) == result.held_out_states and not {c.key for c in train} & {c.key for c in held}
    assert result.decision.paired.n == result.held_out_states
    assert result.promoted and result.decision.passed and result.decision.paired.wins == result.held_out_states
    assert app.policies["answerer"].version == "good"
    assert app.registry.decision("answerer", "good") == result.decision
    [trail] = app.registry.promotions("answerer")
    assert (trail.version, trail.forced) == ("good", False)
    assert result.summary()["gate"].startswith("PASS answerer good vs base")


def test_a_candidate_no_better_is_published_but_does_not_serve(app: MemoryClient) -> None:
    result = retrain(app, RetrainConfig(version="bad"), trainer=publishing([]))
    assert not result.promoted and not result.decision.passed and result.decision.paired.ties == result.held_out_states
    assert app.policies["answerer"].version == "base" and app.registry.promotions("answerer") == []
    assert app.registry.decision("answerer", "bad").passed is False  # the failure is on record
    assert "bad" in [m.version for m in app.registry.versions("answerer")]


def test_too_few_judged_answers_is_a_clear_error(tmp_path: Path) -> None:
    with MemoryClient(data_dir=tmp_path / "few", embedder=HashEmbedder(64), backend=AdapterBackend()) as client:
        judged_log(client, 2, gold="x")
        with pytest.raises(InvalidInput, match="2 judged answers, fewer than min_states=4"):
            retrain(client, RetrainConfig(version="v"), trainer=publishing([]))


def test_memsdk_train_is_the_installed_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import memsdk.client.sync as sync
    import memsdk_training.retrain as module

    data_dir = tmp_path / "app"
    with MemoryClient(data_dir=data_dir, embedder=HashEmbedder(64), backend=AdapterBackend()) as client:
        judged_log(client, 8, gold="answerer-good")
    # the command builds the app's client itself: give it the scripted backend and embedder, and the publishing trainer
    monkeypatch.setattr(sync.MemoryClient, "_make_backend", lambda self, endpoint: AdapterBackend())
    monkeypatch.setattr(module, "train_answerer", lambda config, steps: publishing([]))
    real_init = sync.MemoryClient.__init__
    monkeypatch.setattr(sync.MemoryClient, "__init__", lambda self, **kw: real_init(self, **{"embedder": HashEmbedder(64), **kw}))
    assert memsdk_cli(["train", "answerer", "--from-log", str(data_dir), "--version", "good"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["promoted"] is True and out["version"] == "good" and out["gate"].startswith("PASS")
    assert memsdk_cli(["train", "answerer", "--from-log", str(data_dir), "--version", "bad"]) == 0  # a failed gate is a verdict, not an error
    out = json.loads(capsys.readouterr().out)
    assert out["promoted"] is False and out["gate"].startswith("FAIL")
    assert memsdk_cli(["--data-dir", str(data_dir), "policies"]) == 0
    listing = json.loads(capsys.readouterr().out)["answerer"]
    assert listing["version"] == "good" and listing["gate"]["bad"].startswith("FAIL")


@pytest.mark.slow  # trains a tiny model for real and serves it in-process
def test_the_real_recipe_trains_publishes_and_is_gated(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    model = make_format_model(tmp_path / "tiny")
    config = tmp_path / "answerer.json"
    config.write_text(json.dumps({"model_path": str(model), "num_threads": 1, "group_size": 2, "prompts_per_step": 2, "max_tokens": 8, "steps": 2, "progress": False}))
    policies = {"extractor": "heuristic", "manager": "heuristic", "answerer": "llm"}
    with TransformersBackend(model, num_threads=1) as backend, MemoryClient(data_dir=tmp_path / "app", embedder=HashEmbedder(64), backend=backend, policies=policies) as client:
        judged_log(client, 6, gold="Rex")
        assert len(log_answer_cases(client.log, client.bank)) == 6
        result = retrain(client, RetrainConfig(version="tiny-1", recipe_config=str(config)))
        metrics = [json.loads(line) for line in (tmp_path / "app" / "training" / "tiny-1" / "metrics.jsonl").read_text().splitlines()]
        assert len(metrics) == 2 and result.training["steps"] == 2
        assert (tmp_path / "app" / "training" / "tiny-1" / "curves.png").exists()
        assert client.registry.decision("answerer", "tiny-1") == result.decision  # recorded whatever it says
        assert result.promoted == result.decision.passed
        assert client.policies["answerer"].version == ("tiny-1" if result.promoted else "base")
        assert result.decision.paired.n == result.held_out_states


def test_memsdk_train_without_the_training_package_says_what_to_install(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])  # as if memsdk[training] were not installed
    assert memsdk_cli(["train", "answerer", "--from-log", "anywhere"]) == 2
    assert "pip install 'memsdk[training]'" in capsys.readouterr().err



def test_the_manager_is_retrained_from_the_ingests_judged_answers_cited(tmp_path: Path) -> None:
    """`retrain(role="manager")`: the held-out logged ingests are replayed through the
    candidate and the serving manager (test_gate_manager's scripted replies: "good" keeps
    each fact, base keeps none); the candidate serves only if it wins there."""
    from memsdk.gate import ManagerCase

    from ..client.test_gate_manager import FactAnswerer, ManagerBackend, judged_traffic

    policies = {"extractor": "heuristic", "manager": "llm", "answerer": FactAnswerer()}
    with MemoryClient(data_dir=tmp_path / "app", embedder=HashEmbedder(64), backend=ManagerBackend(), policies=policies) as client:
        judged_traffic(client)
        jobs: list[Job] = []
        bad = retrain(client, RetrainConfig(role="manager", version="bad", holdout=0.5), trainer=publishing(jobs, "manager"))
        assert not bad.promoted and bad.decision.role == "manager" and bad.decision.paired.ties == bad.held_out_states == 3
        good = retrain(client, RetrainConfig(role="manager", version="good", holdout=0.5), trainer=publishing(jobs, "manager"))
        assert good.promoted and good.decision.paired.wins == 3 and client.policies["manager"].version == "good"
        assert all(isinstance(c, ManagerCase) for job in jobs for c in job.train) and len(jobs[0].train) == 3
        with pytest.raises(InvalidInput, match="logged ingests cited by a judged answer, fewer than min_states=10"):
            retrain(client, RetrainConfig(role="manager", version="v", min_states=10), trainer=publishing([], "manager"))


@pytest.mark.slow  # trains a tiny model's manager for real on logged ingests and gates it in-process
def test_the_real_manager_recipe_trains_on_the_log_and_is_gated(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    model = make_format_model(tmp_path / "tiny")
    config = tmp_path / "manager.json"
    config.write_text(json.dumps({
        "model_path": str(model), "num_threads": 1, "embedder": "hash", "answerer": "extractive", "group_size": 2, "prompts_per_step": 1,
        "max_tokens": 8, "steps": 1, "progress": False, "warm_start_steps": 0,
    }))  # fmt: skip
    from ..client.test_gate_manager import judged_traffic

    policies = {"extractor": "heuristic", "manager": "llm", "answerer": "heuristic"}
    with TransformersBackend(model, num_threads=1) as backend, MemoryClient(data_dir=tmp_path / "app", embedder=HashEmbedder(64), backend=backend, policies=policies) as client:
        judged_traffic(client)
        result = retrain(client, RetrainConfig(role="manager", version="tiny-m1", recipe_config=str(config), min_states=2))
        assert result.training["steps"] == 1 and result.train_states + result.held_out_states >= 2
        assert client.registry.decision("manager", "tiny-m1") == result.decision  # recorded whatever it says
        assert result.promoted == result.decision.passed
        assert client.policies["manager"].version == ("tiny-m1" if result.promoted else "base")
