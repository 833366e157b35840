"""ManagerEnv: parse -> to_ops -> MemoryBank.apply on a fork -> frozen answerer -> reward."""

from __future__ import annotations

import json

import pytest

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.llm.base import SamplingParams
from memsdk.policies import LLMManager
from memsdk.store.memory import InMemoryTransport
from memsdk.types import EventType, Op, Scope, Turn
from memsdk_training.env import EnvConfig, ManagerEnv, MemoryState, QAItem, retrieve_related

from ._fakes import KeywordAnswerer, SamplingFake

SCOPE = Scope(user_id="caroline")
DOG = QAItem("What is the name of Caroline's dog?", "Buddy", ("D1:1",), 4)
CAT = QAItem("What is Caroline's cat called?", "Luna", ("D1:2",), 4)
HIKE = QAItem("Where does Caroline hike?", "Alps", ("D1:2",), 4)

ADD_CAT = json.dumps({"ops": [{"op": "ADD", "text": "Caroline adopted a cat named Luna"}]})
UPDATE_DOG = json.dumps({"ops": [{"op": "UPDATE", "id": 0, "text": "Caroline has a dog named Buddy and a cat named Luna"}]})
NOOP = json.dumps({"ops": [{"op": "NOOP"}]})
GARBAGE = "Sure! I would add the cat to memory."


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(64)


@pytest.fixture
def state(embedder: HashEmbedder) -> MemoryState:
    bank = MemoryBank(InMemoryTransport(embedder.dim), embedder)
    bank.apply(SCOPE, [Op.add("Caroline has a dog named Buddy", source_turn_ids=("D1:1",)), Op.add("Caroline lives in Paris")])
    turn = Turn(speaker="Caroline", text="I adopted a cat, Luna!", turn_id="D1:2")
    return MemoryState("t/D1:2", bank.snapshot(SCOPE), ("Caroline adopted a cat named Luna",), (DOG, CAT), turn)


def make_env(embedder: HashEmbedder, *replies: str, metric: str = "f1", format_reward: float = 0.0) -> tuple[ManagerEnv, SamplingFake, KeywordAnswerer]:
    backend = SamplingFake(manager=list(replies) or [NOOP])
    answerer = KeywordAnswerer({"dog": "Buddy", "cat": "a cat named Luna"})
    config = EnvConfig(metric=metric, format_reward=format_reward)
    return ManagerEnv(LLMManager(backend), answerer, embedder, config), backend, answerer  # type: ignore[arg-type]


def texts(snapshot) -> list[tuple[str, int]]:
    return sorted((r.text, r.version) for r in snapshot.records(include_deleted=True))


def test_add_is_applied_on_a_fork_through_memory_bank_apply(state: MemoryState, embedder: HashEmbedder) -> None:
    env, _, _ = make_env(embedder)
    before_points, before_texts = state.bank.points, texts(state.bank)

    result = env.step(state, ADD_CAT)

    assert state.bank.points == before_points and texts(state.bank) == before_texts  # the shared state is untouched
    assert not result.parse_failed and result.rejected == () and result.changed
    added = [r for r in result.bank.records() if "Luna" in r.text]
    assert [(r.text, r.source_turn_ids, r.version) for r in added] == [("Caroline adopted a cat named Luna", ("D1:2",), 1)]
    events = [e for e in result.bank.history() if e.memory_id == added[0].id]
    assert [(e.event, e.actor.role, e.batch_id) for e in events] == [(EventType.ADD, "manager", result.transition.batch_id)]
    assert result.bank.violations() == []


def test_update_targets_the_memory_the_alias_named_in_the_prompt(state: MemoryState, embedder: HashEmbedder) -> None:
    env, _, _ = make_env(embedder)
    shown = env.observe(state)
    assert shown.related[0].record.text == "Caroline has a dog named Buddy"  # the closest memory is alias [0]
    assert "[0] Caroline has a dog named Buddy" in shown.messages[1]["content"]  # the user turn; [-1] is the response prefix

    result = env.step(state, UPDATE_DOG)

    updated = result.bank.records()
    dog = next(r for r in updated if r.id == shown.related[0].record.id)
    assert (dog.text, dog.version, dog.source_turn_ids) == ("Caroline has a dog named Buddy and a cat named Luna", 2, ("D1:1", "D1:2"))
    last = result.bank.history()[-1]
    assert (last.event, last.before, last.memory_id) == (EventType.UPDATE, "Caroline has a dog named Buddy", dog.id)
    assert result.bank.violations() == []


def test_garbage_output_flags_a_parse_failure_and_is_judged_on_the_unchanged_bank(state: MemoryState, embedder: HashEmbedder) -> None:
    env, _, answerer = make_env(embedder)

    result = env.step(state, GARBAGE)

    assert result.parse_failed and result.parse_error.startswith("not JSON")
    assert result.ops == () and not result.changed
    assert texts(result.bank) == texts(state.bank) and len(result.bank.history()) == len(state.bank.history())
    # the reward is still computed, on M_old: the dog is answerable, the cat is not
    assert [(a.prediction, a.score) for a in result.answers] == [("Buddy", 1.0), ("unknown", 0.0)]
    assert result.reward == 0.5
    assert all("Luna" not in t for _, shown in answerer.seen for t in shown)


def test_ops_the_guard_rejects_change_nothing(state: MemoryState, embedder: HashEmbedder) -> None:
    env, _, _ = make_env(embedder)

    result = env.step(state, json.dumps({"ops": [{"op": "DELETE", "id": 7}]}))

    assert not result.parse_failed and result.rejected == ("ops[0]: DELETE of unknown memory [7]",)
    assert texts(result.bank) == texts(state.bank) and result.reward == 0.5


def test_reward_is_the_hand_computed_mean_f1_or_em(state: MemoryState, embedder: HashEmbedder) -> None:
    # dog: "Buddy" vs "Buddy" -> 1.0.  cat: "a cat named Luna" -> tokens [cat, named, luna]
    # vs [luna]: P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 0.5.  Mean F1 = 0.75; EM = (1 + 0) / 2.
    f1_env, _, _ = make_env(embedder, metric="f1")
    em_env, _, _ = make_env(embedder, metric="em")

    f1 = f1_env.step(state, ADD_CAT)
    em = em_env.step(state, ADD_CAT)

    assert [a.score for a in f1.answers] == [1.0, 0.5] and f1.reward == pytest.approx(0.75)
    assert [a.score for a in em.answers] == [1.0, 0.0] and em.reward == 0.5


def test_format_reward_is_added_only_when_every_op_is_applied(state: MemoryState, embedder: HashEmbedder) -> None:
    # F1 as in the test above: ADD_CAT 0.75, a NOOP / garbage / rejected reply leaves the bank: 0.5
    env, _, _ = make_env(embedder, format_reward=0.2)

    added, kept, garbage = env.step(state, ADD_CAT), env.step(state, NOOP), env.step(state, GARBAGE)
    rejected = env.step(state, json.dumps({"ops": [{"op": "DELETE", "id": 7}]}))

    assert (added.valid, kept.valid, garbage.valid, rejected.valid) == (True, True, False, False)
    assert added.reward == pytest.approx(0.75 + 0.2) and kept.reward == pytest.approx(0.5 + 0.2)
    assert garbage.reward == pytest.approx(0.5) and rejected.reward == pytest.approx(0.5)


def test_answerer_reads_top_k_of_the_new_bank(state: MemoryState, embedder: HashEmbedder) -> None:
    backend = SamplingFake(manager=[NOOP])
    answerer = KeywordAnswerer({})
    env = ManagerEnv(LLMManager(backend), answerer, embedder, EnvConfig(answer_k=2))  # type: ignore[arg-type]

    env.step(state, ADD_CAT)

    assert all(len(shown) == 2 for _, shown in answerer.seen)
    fork = MemoryBank.from_snapshot(env.step(state, ADD_CAT).bank, embedder)
    assert answerer.seen[0][1] == [h.record.text for h in fork.search(SCOPE, DOG.question, limit=2)]


def test_prompt_is_the_runtime_managers_own(state: MemoryState, embedder: HashEmbedder) -> None:
    env, backend, _ = make_env(embedder)
    related = retrieve_related(MemoryBank.from_snapshot(state.bank, embedder), SCOPE, state.facts, env.config.related_k)

    env.manager.decide(state.facts, related)  # what the client would send for this state

    assert backend.requests[-1]["messages"] == env.messages(state)


def test_group_rollouts_share_one_seeded_qa_subset(state: MemoryState, embedder: HashEmbedder) -> None:
    state = state.with_qa((DOG, CAT, HIKE))
    env, backend, answerer = make_env(embedder, ADD_CAT, UPDATE_DOG, NOOP, GARBAGE)
    params = SamplingParams(temperature=0.7, n=4, seed=3, max_tokens=96)

    group = env.sample_group(state, params, qa_per_group=2, seed=11)

    assert len(group.state.qa) == 2 and set(group.state.qa) <= {DOG, CAT, HIKE}
    assert len(group.rollouts) == 4 and len(group.rewards) == 4
    for rollout in group.rollouts:
        assert tuple(a.item for a in rollout.result.answers) == group.state.qa
    asked = [q for q, _ in answerer.seen]
    assert asked == [q.question for q in group.state.qa] * 4
    sent = backend.requests[0]["params"]
    assert sent.model_copy(update={"stop": params.stop}) == params and sent.stop == ("}]}",)  # the trainer's sampling, the policy's stop
    assert backend.requests[0]["messages"] == list(group.observation.messages)
    assert len({r.output for r in group.rollouts}) > 1  # sampled, not one output repeated
    assert env.sample_group(state, params, qa_per_group=2, seed=11).state.qa == group.state.qa  # same seed, same subset
    subsets = {env.sample_group(state, params, qa_per_group=2, seed=s).state.qa for s in range(8)}
    assert len(subsets) > 1  # the seed does choose


def test_a_greedy_group_is_refused(state: MemoryState, embedder: HashEmbedder) -> None:
    env, _, _ = make_env(embedder)
    with pytest.raises(ValueError, match="temperature"):
        env.sample_group(state, SamplingParams(temperature=0.0, n=4))
