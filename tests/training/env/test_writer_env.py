"""Mem-alpha's environment: a rollout runs the runtime's write_steps, and its rewards are
the paper's terms, checked against hand-computed values."""

from __future__ import annotations

import json

import pytest

from memsdk.embedding import HashEmbedder
from memsdk.interactions.types import AppliedOp
from memsdk.llm.base import SamplingParams
from memsdk.policies import ExtractiveAnswerer, LLMWriter, PolicyConfig
from memsdk.types import Scope, Turn
from memsdk_training.env import Episode, QAItem, Session
from memsdk_training.env.writer_env import Frozen, WriterRollout, WriterStep, grounded_judge, llm_judge, roll_out
from memsdk_training.rewards import MemAlphaConfig

from tests.policies.conftest import ScriptedBackend

TURNS = [("alice", "alice likes green tea"), ("bob", "bob has a dog named rex"), ("alice", "alice moved to paris"), ("bob", "bob runs every morning")]


def episode() -> Episode:
    turns = tuple(Turn(speaker=s, text=t, turn_id=f"D1:{i}") for i, (s, t) in enumerate(TURNS))
    return Episode("e", Scope(user_id="u", run_id="e"), (Session("e/s0", turns, (QAItem("what tea does alice like", "green tea", ("D1:0",)),)),))


def step(executed: tuple[bool, ...], valid: tuple[bool, ...]) -> WriterStep:
    return WriterStep("p", (1,), "t", executed, valid, parse_failed=False)


def test_rewards_are_r1_plus_r2_plus_w3_r3_plus_w4_r4_per_step() -> None:
    rollout = WriterRollout((step((True, False), (True, False)), step((True, True, True), (True, True, False)), step((), ())), qa=0.5, compression=0.8, memory_chars=20, context_chars=100)
    # step 1: .5 + 1/2 + .05 * .8 + .1 * 1/2 = 1.09; step 2: .5 + 1 + .04 + .1 * 2/3; step 3 (no calls): R2 = R4 = 0
    assert rollout.rewards(MemAlphaConfig()) == pytest.approx([1.09, 1.54 + 0.2 / 3, 0.54])


def test_a_rollout_applies_each_call_through_the_bank_and_counts_what_executed() -> None:
    replies = [
        json.dumps({"calls": [{"fn": "memory_insert", "tier": "semantic", "text": "alice likes green tea"}, {"fn": "memory_insert", "tier": "episodic", "text": "bob has a dog named rex"}]}),
        json.dumps({"calls": [{"fn": "memory_update", "id": 0, "text": "alice likes green tea and lives in paris"}, {"fn": "memory_delete", "id": 7}]}),
    ]
    writer = LLMWriter(ScriptedBackend(*replies), PolicyConfig(reask=False))
    frozen = Frozen(HashEmbedder(64), ExtractiveAnswerer(), grounded_judge, chunk_turns=2)
    rollout = roll_out(episode(), writer, lambda messages: "rendered", SamplingParams(temperature=1.0, seed=3), frozen, episode().sessions[0].qa)
    first, second = rollout.steps
    assert first.executed == (True, False) and first.valid == (True, False)  # the bank refused the episodic insert
    assert second.executed == (False, True) and second.valid == (False, True)  # alias [7] never reached the bank
    assert first.prompt == "rendered" and not first.parse_failed
    # L_M: the live semantic memory after the update; L_C: the four turns
    assert rollout.memory_chars == len("alice likes green tea and lives in paris")
    assert rollout.context_chars == sum(len(t) for _, t in TURNS)
    assert rollout.compression == pytest.approx(1 - rollout.memory_chars / rollout.context_chars)
    assert 0.0 < rollout.qa <= 1.0  # "green tea" is in what retrieval shows the extractive answerer


def test_the_llm_judge_reads_yes_and_nothing_else_as_valid() -> None:
    op = AppliedOp(op="ADD", memory_id=None, before=None, after="alice likes green tea", version=1, changed=True)
    backend = ScriptedBackend("Yes.", "no", "Maybe yes")
    judge = llm_judge(backend, "judge")
    assert [judge("alice: I like green tea", op) for _ in range(3)] == [True, False, False]
    assert "alice likes green tea" in backend.requests[0]["messages"][1]["content"] and backend.requests[0]["model"] == "judge"


def test_the_grounded_judge() -> None:
    add = lambda text: AppliedOp(op="ADD", memory_id=None, before=None, after=text, version=1, changed=True)  # noqa: E731
    assert grounded_judge("alice: I like green tea", add("alice likes green tea"))
    assert not grounded_judge("alice: I like green tea", add("the capital of france is paris"))
