"""DeltaMem's environment and target builders: triples from a teacher's run through the client
and from an app's hand corrections in the log; a rollout through the runtime's own DeltaMem
steps; its reward terms (format, retrieval, soft state F1) computed by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from memsdk import LLMSpec, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.llm.base import Choice, Completion, SamplingParams
from memsdk.types import Scope, Turn
from memsdk_training.env import TargetTriple, correction_triples, heuristic_teacher, teacher_triples
from memsdk_training.env.deltamem_env import DeltaMemEnv
from memsdk_training.rewards import retrieval_score

ANN = Scope(user_id="ann")
BUDDY, PARIS = "Has a dog named Buddy", "Lives in Paris"
MERGED = "Has a dog named Buddy and a second dog named Scout"
SCOUT = Turn(speaker="Ann", text="I adopted a second dog named Scout", turn_id="D2:1")
FACT = "Ann: I adopted a second dog named Scout"  # the heuristic extractor's rendering


class ScriptedModel:
    """A backend whose reply is a function of the request's messages (a scripted model)."""

    model = "scripted"
    supports_schema = False

    def __init__(self, reply: Callable[[Sequence[dict[str, str]]], dict[str, object]]) -> None:
        self.reply, self.requests = reply, []

    def chat(self, messages: Sequence[dict[str, str]], *, params: SamplingParams, model: str | None = None, schema: dict | None = None) -> Completion:
        self.requests.append([dict(m) for m in messages])
        text = json.dumps(self.reply(messages))
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        return Completion(model="scripted", choices=[Choice(text=text[len(prefix) :] if text.startswith(prefix) else text, finish_reason="stop", token_ids=[1, 2])])


def alias(messages: Sequence[dict[str, str]], text: str) -> int:
    """The number the policy was shown ``text`` under (in the list or in a search's results)."""
    found = re.findall(r"\[(\d+)\] " + re.escape(text) + r"$", "\n".join(m["content"] for m in messages if m["role"] == "user"), re.M)
    return int(found[-1])


def merge_buddy(messages: Sequence[dict[str, str]]) -> dict[str, object]:
    return {"ops": [{"op": "UPDATE", "id": alias(messages, BUDDY), "text": MERGED}]}


# -- builder 1: a teacher's run through the client ---------------------------------------------------
@pytest.fixture
def scripted_triple(tmp_path) -> TargetTriple:
    """A DeltaMem teacher (scripted) that merges the new dog into Buddy's memory."""
    teacher = LLMSpec(backend=ScriptedModel(merge_buddy), prompt="deltamem/v1", fallback=False)
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"extractor": "heuristic", "answerer": "heuristic", "manager": teacher}) as client:
        client.add(BUDDY, scope=ANN)
        client.add(PARIS, scope=ANN)
        (triple,) = teacher_triples(client, [("s2", [SCOUT])], ANN)
    return triple


def semantic(snapshot) -> list[str]:
    return sorted(r.text for r in snapshot.records() if r.tier == "semantic")


def test_a_teachers_run_through_the_client_is_a_triple(scripted_triple: TargetTriple) -> None:
    t = scripted_triple
    assert t.key == "s2" and t.source == "teacher" and t.turns == (SCOUT,) and t.facts == ((FACT,),)
    assert semantic(t.before) == sorted([BUDDY, PARIS]) and semantic(t.after) == sorted([MERGED, PARIS])
    assert [r.text for r in t.after.records() if r.tier == "episodic"] == [SCOUT.text]  # the client kept the turn
    assert t.before.violations() == [] and t.after.violations() == [] and t.asks_the_manager


def test_the_heuristic_teacher_builds_triples_state_by_state(tmp_path) -> None:
    client = heuristic_teacher(HashEmbedder(64), tmp_path)
    said = ["I visited the art museum last week", "My sister plays the violin in an orchestra", "We are planning a trip to Kyoto in spring"]
    turns = [Turn(speaker="Bob", text=text, turn_id=f"D1:{i}") for i, text in enumerate(said)]
    try:
        triples = list(teacher_triples(client, [("a", turns[:1]), ("b", turns[1:])], Scope(user_id="bob")))
    finally:
        client.close()
    first, second = triples
    assert semantic(first.before) == [] and not first.asks_the_manager  # an empty bank: ADD without a call
    assert semantic(first.after) == [f"Bob: {said[0]}"] == semantic(second.before)
    assert len(second.turns) == 2 and second.facts == ((f"Bob: {said[1]}",), (f"Bob: {said[2]}",))
    assert semantic(second.after) == sorted(f"Bob: {text}" for text in said)  # the heuristic ADDed each new fact


# -- builder 2: hand corrections in the interaction log --------------------------------------------------
def test_an_apps_update_delete_and_restore_after_an_ingest_are_its_target(tmp_path) -> None:
    def policy(messages: Sequence[dict[str, str]]) -> dict[str, object]:
        fact = re.search(r"New fact: <<<(.*)>>>", messages[1]["content"]).group(1)  # type: ignore[union-attr]
        if "quit" in fact:  # the policy wrongly forgets the job
            return {"ops": [{"op": "DELETE", "id": alias(messages, "Caroline: I work as a counselor at a school in Boston")}]}
        return {"ops": [{"op": "ADD", "text": fact}]}

    scope = Scope(user_id="caroline")
    manager = LLMSpec(backend=ScriptedModel(policy), prompt="deltamem/v1", fallback=False)
    said = ["I adopted a dog named Buddy from the shelter", "I work as a counselor at a school in Boston", "I quit smoking, the school in Boston helped", "My favourite food is sushi with lots of ginger"]
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"extractor": "heuristic", "answerer": "heuristic", "manager": manager}) as c:
        say = lambda i: c.ingest(Turn(speaker="Caroline", text=said[i], turn_id=f"D1:{i}"), scope=scope)  # noqa: E731
        dog = say(0).ops[0].memory_id  # a first memory: ADDed without a call
        c.update(dog, "Caroline adopted Buddy, a beagle, from the shelter", scope=scope)  # corrects ingest 0
        job = say(1).ops[0].memory_id  # not corrected: no triple
        assert [o.op for o in say(2).ops] == ["DELETE"]
        c.restore(job, scope=scope)  # corrects ingest 2: the job was never quit
        food = say(3).ops[0].memory_id
        c.delete(food, scope=scope)  # corrects ingest 3: not worth keeping
        triples = list(correction_triples(c.log, c.bank))

    dog_fixed, job_text = "Caroline adopted Buddy, a beagle, from the shelter", "Caroline: I work as a counselor at a school in Boston"
    assert [t.turns[0].turn_id for t in triples] == ["D1:0", "D1:2", "D1:3"] and {t.source for t in triples} == {"correction"}
    first, restored, deleted = triples
    assert semantic(first.before) == [] and semantic(first.after) == [dog_fixed]
    assert first.facts == ((f"Caroline: {said[0]}",),)
    # ingest 2 deleted the job; the app's restore makes "keep it" the target
    assert semantic(restored.before) == sorted([dog_fixed, job_text]) == semantic(restored.after)
    # ingest 3 added the food; the app's delete makes "nothing new" the target
    assert semantic(deleted.before) == sorted([dog_fixed, job_text]) == semantic(deleted.after)
    assert all(s.violations() == [] for t in triples for s in (t.before, t.after))


# -- a rollout and its reward terms, by hand -----------------------------------------------------------
def keyword_rows(pred: Sequence[str], target: Sequence[str]) -> np.ndarray:
    """Phi = 1 between two memories about the same thing (Buddy, or not), else 0."""
    return np.array([[float(("Buddy" in p) == ("Buddy" in t)) for t in target] for p in pred])


def env_for(reply: Callable[[Sequence[dict[str, str]]], dict[str, object]], **kw: object) -> tuple[DeltaMemEnv, ScriptedModel]:
    backend = ScriptedModel(reply)
    return DeltaMemEnv(backend, lambda messages: json.dumps(messages), HashEmbedder(64), similarity=keyword_rows, **kw), backend  # type: ignore[arg-type]


def roll(env: DeltaMemEnv, triple: TargetTriple):  # type: ignore[no-untyped-def]
    return env.roll_out(triple, SamplingParams(temperature=1.0, max_tokens=32, seed=7))


def test_search_then_the_targets_update_scores_one_and_every_call_is_a_row(scripted_triple: TargetTriple) -> None:
    def look_then_merge(messages: Sequence[dict[str, str]]) -> dict[str, object]:
        return merge_buddy(messages) if "Found for" in messages[-2]["content"] else {"search": "dog"}

    env, backend = env_for(look_then_merge)
    r = roll(env, scripted_triple)
    assert (r.format, r.retrieval, r.state.f1, r.reward) == (1.0, 1.0, 1.0, pytest.approx(1.0))
    assert r.lookups == 1 and len(r.calls) == 2 == len(backend.requests)  # the search and the ops: two rows
    assert r.calls[0].text == '{"search": "dog"}' and r.calls[0].token_ids == (1, 2) and not r.calls[0].parse_failed
    assert "Found for <<<dog>>>" in r.calls[1].prompt  # the second row's prompt holds the search and its result
    assert sorted(r.predicted) == sorted([MERGED, PARIS])


def test_noop_scores_the_keywords_it_keeps(scripted_triple: TargetTriple) -> None:
    env, _ = env_for(lambda m: {"ops": [{"op": "NOOP"}]})
    r = roll(env, scripted_triple)
    # Delta_pred = {BUDDY}, Delta_target = {MERGED}, matched (Phi 1); MERGED's keywords
    # {has, dog, named, buddy, and, second, scout} (articles dropped), BUDDY covers 4 of 7
    s = 4 / 7
    assert r.format == 1.0 and r.retrieval == 1.0  # well formed; the target's Buddy was shown
    assert r.state.f1 == pytest.approx(s) and r.reward == pytest.approx(0.1 + 0.1 + 0.8 * s)


def test_an_alias_never_shown_costs_format_and_retrieval(scripted_triple: TargetTriple) -> None:
    env, _ = env_for(lambda m: {"ops": [{"op": "UPDATE", "id": 7, "text": MERGED}]})
    r = roll(env, scripted_triple)
    # the guard drops the op (the bank stays as before: state as NOOP); wanted = {Buddy (the
    # target's), alias 7 (never shown)}, retrieved = both memories shown -> 1 / 2
    assert r.format == 0.0 and r.retrieval == 0.5 and r.state.f1 == pytest.approx(4 / 7)
    assert r.reward == pytest.approx(0.1 * 0.5 + 0.8 * 4 / 7)


def test_an_unintended_update_is_not_matched(scripted_triple: TargetTriple) -> None:
    rewritten = "Lives in Paris with a dog named Scout"
    env, _ = env_for(lambda m: {"ops": [{"op": "UPDATE", "id": alias(m, PARIS), "text": rewritten}]})
    r = roll(env, scripted_triple)
    # Delta_pred = {BUDDY, rewritten (unintended: the target left Paris alone)}, Delta_target =
    # {MERGED, PARIS}; only (BUDDY, MERGED) may match: P = R = (4/7) / 2
    assert set(r.state.deltas.pred) == {BUDDY, rewritten} and set(r.state.deltas.target) == {MERGED, PARIS}
    assert r.state.matches == ((r.state.deltas.pred.index(BUDDY), r.state.deltas.target.index(MERGED)),)
    assert r.state.f1 == pytest.approx(2 / 7) and r.format == 1.0 and r.retrieval == 1.0


def test_searches_past_the_budget_are_not_well_formed(scripted_triple: TargetTriple) -> None:
    env, backend = env_for(lambda m: {"search": "dog"}, max_lookups=1)
    r = roll(env, scripted_triple)
    assert len(backend.requests) == 2 and r.lookups == 1 and r.format == 0.0 and r.state.f1 == pytest.approx(4 / 7)


def test_unparseable_replies_are_marked_on_their_rows(scripted_triple: TargetTriple) -> None:
    env, _ = env_for(lambda m: {"nothing": 1})
    r = roll(env, scripted_triple)
    assert [c.parse_failed for c in r.calls] == [True] and r.format == 0.0


def test_retrieval_score_is_the_share_of_wanted_memories_retrieved() -> None:
    assert retrieval_score([], ["a"]) == 1.0
    assert retrieval_score(["a", "b"], ["a", "c"]) == 0.5
    assert retrieval_score(["a", "a"], ["a"]) == 1.0
