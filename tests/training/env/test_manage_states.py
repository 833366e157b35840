"""Manager states from the management benchmark: the gold bank before a turn, the gold state
after it, and the gold teacher whose ops make all of it hold."""

from __future__ import annotations

import json

import pytest

from memsdk.embedding import HashEmbedder
from memsdk.eval.manage.scenarios import generate, relations
from memsdk.policies import LLMManager, PolicyConfig
from memsdk_training.env import EnvConfig, ManagerEnv
from memsdk_training.env.manage import gold_ops, manage_states
from memsdk_training.recipes.warm_start import teacher_examples

from ._fakes import KeywordAnswerer, SamplingFake

EMBEDDER = HashEmbedder(64)


@pytest.fixture(scope="module")
def states():
    return list(manage_states(EMBEDDER, "train", 12))


def env(related_k: int = 5) -> ManagerEnv:
    manager = LLMManager(SamplingFake(manager=['{"ops": [{"op": "NOOP"}]}']), PolicyConfig(constrained=False, reask=False))  # type: ignore[arg-type]
    return ManagerEnv(manager, KeywordAnswerer({}), EMBEDDER, EnvConfig(related_k=related_k))


def test_states_carry_the_gold_state_after_their_turn(states) -> None:
    chosen = generate("train", 12)
    acts = {(sc.id, new, old): label for sc in chosen for new, old, label, _ in relations(sc)}
    assert states and len({s.key for s in states}) == len(states)
    for s in states:
        own = s.source_turn_ids[0]
        assert s.facts and s.expect and s.expect[0].turn_ids == (own,)
        assert not any(own in r.source_turn_ids for r in s.bank.records(include_deleted=True))  # the bank is from before the turn
        for e in s.expect[1:]:
            label = acts[(s.key.split("/")[0], own, e.turn_ids[0])]
            assert e.status == {"supersedes": "retired", "corrects": "retired"}.get(label, "current")
    assert {e.status for s in states for e in s.expect} == {"current", "retired", "absent"}


def test_a_noop_fails_a_replacement_and_the_gold_ops_make_it_all_hold(states) -> None:
    e = env()
    replacing = [s for s in states if any(x.status == "retired" for x in s.expect)]
    assert replacing
    for s in replacing:
        assert e.step(s, '{"ops": [{"op": "NOOP"}]}').reward < 1.0  # the old fact stays current, the new one is not stored
        related = e.observe(s).related
        ops = gold_ops(s, related)
        if ops is not None:
            assert any(op.supersedes for op in ops)


def test_the_gold_teacher_writes_replaces_by_alias_and_scores_full_reward(states) -> None:
    e = env()
    examples = teacher_examples(e, states, render=lambda messages: "", teacher=gold_ops, perfect=True)
    prefix = e.manager.caller.prompt.response_prefix
    by_key = {s.key: s for s in states}
    assert examples and any('"replaces"' in x.target for x in examples)
    for x in examples:
        assert e.step(by_key[x.key], prefix + x.target).reward == 1.0
        assert all(op["op"] in ("ADD", "NOOP") for op in json.loads(prefix + x.target)["ops"])
