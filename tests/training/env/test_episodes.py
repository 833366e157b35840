"""Memory-R2 episodes: chunked sessions, per-session rewards, anchor re-rolls at the training temperature."""

from __future__ import annotations

import json

import pytest

from memsdk.embedding import HashEmbedder
from memsdk.llm.base import SamplingParams
from memsdk.policies import PolicyConfig
from memsdk.types import Scope, Turn
from memsdk_training.env import Episode, EpisodeConfig, EpisodeRunner, QAItem, Session, chunks, word_count
from memsdk_training.rewards import session_reward

from ._fakes import KeywordAnswerer, SamplingFake

TRAINING = PolicyConfig(model="r2-lora", params=SamplingParams(temperature=0.7, max_tokens=96, seed=5))


def facts(*items: str) -> str:
    return json.dumps({"facts": list(items)})


def add(text: str) -> str:
    return json.dumps({"ops": [{"op": "ADD", "text": text}]})


EXTRACTOR_POOL = [facts("Caroline has a dog named Buddy"), facts("Melanie paints sunsets", "Caroline hikes"), facts(), "not json at all"]
MANAGER_POOL = [
    add("Caroline has a dog named Buddy"),
    add("Melanie paints sunsets at the lake"),
    add("Caroline hikes in the Alps every summer"),
    json.dumps({"ops": [{"op": "UPDATE", "id": 0, "text": "Caroline has a dog named Buddy and hikes"}]}),
    json.dumps({"ops": [{"op": "NOOP"}]}),
]


def turn(session: int, i: int, speaker: str, text: str) -> Turn:
    return Turn(speaker=speaker, text=text, timestamp=f"day {session}", turn_id=f"D{session}:{i}")


EPISODE = Episode(
    key="toy",
    scope=Scope(user_id="toy"),
    sessions=(
        Session(
            "toy/session_1",
            tuple(turn(1, i, s, t) for i, (s, t) in enumerate([("Caroline", "My dog Buddy is great"), ("Melanie", "I paint sunsets"), ("Caroline", "I hike a lot"), ("Melanie", "Nice")], 1)),
            (QAItem("What is the name of Caroline's dog?", "Buddy", ("D1:1",)),),
        ),
        Session(
            "toy/session_2",
            tuple(turn(2, i, s, t) for i, (s, t) in enumerate([("Melanie", "Painting by the lake"), ("Caroline", "Hiking in the Alps soon"), ("Melanie", "Have fun")], 1)),
            (QAItem("Where does Caroline hike?", "in the Alps", ("D2:2",)), QAItem("What does Melanie paint?", "sunsets", ("D1:2",))),
        ),
    ),
)


@pytest.fixture
def runner() -> tuple[EpisodeRunner, SamplingFake]:
    backend = SamplingFake(r2_extractor=EXTRACTOR_POOL, r2_manager=MANAGER_POOL)
    answerer = KeywordAnswerer({"dog": "Buddy", "hike": "Alps", "paint": "sunsets"})
    return EpisodeRunner(backend, answerer, HashEmbedder(64), TRAINING, EpisodeConfig(chunk_turns=2)), backend  # type: ignore[arg-type]


def state_of(snapshot) -> tuple[tuple[str, int, bool], ...]:
    return tuple(sorted((r.text, r.version, r.deleted) for r in snapshot.records(include_deleted=True)))


def test_chunks_are_k_turns_with_a_short_last_one() -> None:
    assert [len(c) for c in chunks(EPISODE.sessions[0].turns, 3)] == [3, 1]
    with pytest.raises(ValueError):
        list(chunks(EPISODE.sessions[0].turns, 0))


def test_rollout_runs_both_roles_chunk_by_chunk_on_one_backbone(runner) -> None:
    episode_runner, backend = runner

    rollout = episode_runner.rollout(EPISODE)

    assert [s.index for s in rollout.sessions] == [0, 1]
    roles = [r["role"] for r in backend.requests]
    assert roles[0] == "r2_extractor" and set(roles) <= {"r2_extractor", "r2_manager"}
    assert {r["model"] for r in backend.requests} == {"r2-lora"}
    assert all(r["params"].temperature == 0.7 for r in backend.requests)
    # session 1 has 2 chunks, session 2 has 2: four extractor calls at least (re-asks add more)
    chunk_prompts = [r for r in backend.requests if r["role"] == "r2_extractor" and r["messages"][-1]["role"] == "assistant"]  # first asks end in the response prefix
    assert len(chunk_prompts) == 4
    assert "Caroline: My dog Buddy is great\nMelanie: I paint sunsets" in chunk_prompts[0]["messages"][1]["content"]


def test_session_boundaries_chain_and_rewards_follow_the_memory_r2_formula(runner) -> None:
    episode_runner, _ = runner

    rollout = episode_runner.rollout(EPISODE)

    first, second = rollout.sessions
    assert state_of(first.before) == ()  # episodes start from an empty bank
    assert state_of(second.before) == state_of(first.after)  # the anchor of S_2 is memory after S_1
    tokens = [sum(word_count(f"{t.speaker}: {t.text}") for t in s.turns) for s in EPISODE.sessions]
    assert [first.seen_tokens, second.seen_tokens] == [tokens[0], tokens[0] + tokens[1]]
    for s in rollout.sessions:
        assert s.memory_tokens == sum(word_count(r.text) for r in s.after.records())
        expected_f1 = sum(a.score for a in s.answers) / len(s.answers)
        assert s.qa_f1 == pytest.approx(expected_f1)
        assert s.reward == pytest.approx(session_reward(expected_f1, s.memory_tokens, tokens[: s.index + 1]))
    assert rollout.rewards == [first.reward, second.reward]


def test_anchor_rerolls_sample_at_training_temperature_and_differ(runner) -> None:
    episode_runner, backend = runner
    anchor = episode_runner.rollout(EPISODE)
    calls_before = len(backend.requests)

    rerolls = episode_runner.reroll(anchor, session=1, m=4)

    assert len(rerolls) == 4 and all(r.index == 1 for r in rerolls)
    assert all(state_of(r.before) == state_of(anchor.sessions[1].before) for r in rerolls)  # restored anchor state
    assert all(r["params"].temperature == 0.7 for r in backend.requests[calls_before:])
    seeds = [r["params"].seed for r in backend.requests[calls_before:]]
    assert len(set(seeds)) == len(seeds)  # every call its own seed, none the configured one repeated
    outputs = {tuple(c.raw_output for c in r.calls) for r in rerolls}
    assert len(outputs) == 4  # the local group is not m copies of one rollout
    assert len({state_of(r.after) for r in rerolls}) > 1
    assert all(r.answers[0].item == anchor.sessions[1].answers[0].item for r in rerolls)  # same questions


def test_rerolls_refuse_greedy_sampling() -> None:
    greedy = EpisodeRunner(SamplingFake(), KeywordAnswerer({}), HashEmbedder(64), PolicyConfig(params=SamplingParams(temperature=0.0)))  # type: ignore[arg-type]
    anchor = greedy.rollout(Episode("e", Scope(user_id="e"), ()))
    with pytest.raises(ValueError, match="training temperature"):
        greedy.reroll(anchor, session=0, m=4)


def test_group_members_share_the_qa_subset_and_are_repeatable() -> None:
    def run(seed: int):
        backend = SamplingFake(r2_extractor=EXTRACTOR_POOL, r2_manager=MANAGER_POOL)
        r = EpisodeRunner(backend, KeywordAnswerer({}), HashEmbedder(64), TRAINING, EpisodeConfig(chunk_turns=2, qa_per_session=1))  # type: ignore[arg-type]
        return r.group(EPISODE, 3, seed=seed)

    group = run(1)

    assert all(g.qa == group[0].qa for g in group) and [len(q) for q in group[0].qa] == [1, 1]
    for g in group:
        assert [tuple(a.item for a in s.answers) for s in g.sessions] == list(group[0].qa)
    assert len({tuple(state_of(s.after) for s in g.sessions) for g in group}) > 1
    again = run(1)
    assert [[state_of(s.after) for s in g.sessions] for g in again] == [[state_of(s.after) for s in g.sessions] for g in group]


def test_every_judged_bank_is_one_the_runtime_could_have_produced(runner) -> None:
    episode_runner, _ = runner
    anchor = episode_runner.rollout(EPISODE)
    outcomes = [*anchor.sessions, *episode_runner.reroll(anchor, session=0, m=3), *episode_runner.reroll(anchor, session=1, m=3)]

    for outcome in outcomes:
        assert outcome.before.violations() == [] and outcome.after.violations() == []
        for record in outcome.after.records(include_deleted=True):
            assert record.source_turn_ids and all(t.startswith(("D1:", "D2:")) for t in record.source_turn_ids)
        assert {e.actor.role for e in outcome.after.history()} <= {"r2_manager"}


def test_policy_params_must_be_explicit_and_single_choice() -> None:
    args = (SamplingFake(), KeywordAnswerer({}), HashEmbedder(64))
    with pytest.raises(ValueError, match="training sampling"):
        EpisodeRunner(*args, PolicyConfig())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one choice"):
        EpisodeRunner(*args, PolicyConfig(params=SamplingParams(temperature=0.7, n=4)))  # type: ignore[arg-type]
