"""The release gate for the manager: logged ingests replayed on forks of the bank as it was,
judged by the answerer serving now. The scripted backend's replies are fixed per adapter:
"good" keeps each fact, base and "bad" keep nothing, "sloppy" keeps two facts in three and
answers the third with a reply the runtime cannot parse, even when re-asked. The answerer answers with the semantic fact it is shown, so a
version's reward is whether its decisions kept what users later asked about."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from memsdk import AsyncMemoryClient, GateFailed, InvalidInput
from memsdk.embedding import HashEmbedder
from memsdk.gate import ManagerCase, log_manager_cases
from memsdk.llm.base import Choice, Completion
from memsdk.policies import Answer
from memsdk.types import ScoredMemory

from .test_policy_swap import AdapterBackend, async_twin, publish

# (turn, question, the fact a good manager keeps: in its own words, since a fact that only
# copies its turn is dropped from what an answer is shown)
TURNS = [
    ("I adopted a dog named Buddy last week.", "What is the name of Caroline's dog?", "Caroline's dog is Buddy"),
    ("I work as a nurse at the children's hospital.", "Where does Caroline work?", "Caroline does her work at a children's hospital"),
    ("My sister Anna lives in Lisbon.", "Where does Caroline's sister live?", "Caroline's sister lives in Lisbon"),
    ("I started painting sunsets on weekends.", "What does Caroline paint on weekends?", "Caroline paints sunsets on weekends"),
    ("I run five kilometres every morning.", "How far does Caroline run?", "Caroline can run five kilometres"),
    ("My favourite food is sushi with ginger.", "What food does Caroline like?", "Caroline's favourite food is sushi"),
]
FACTS = [fact for _, _, fact in TURNS]
KEPT = {f"Caroline: {text}": fact for text, _, fact in TURNS}  # the heuristic extractor's fact -> the kept one
SCOPE = {"user_id": "caroline"}


def keywords(text: str) -> set[str]:
    words = {w.strip("?.,:").lower().removesuffix("'s") for w in text.split()}
    return {w for w in words if len(w) > 2} - {"caroline", "what", "where", "does", "the", "how", "name"}


class FactAnswerer:
    """Answers with the semantic fact that shares a keyword with the question ("unknown"
    without one), citing the memories that share one: so an answer cites its own turn."""

    role, version = "answerer", "facts-v1"

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        cited = [m.record for m in memories if keywords(m.record.text) & keywords(question)]
        facts = [r.text for r in cited if r.tier == "semantic"]
        return Answer(facts[0] if facts else "unknown", cited)


class ManagerBackend(AdapterBackend):
    def chat(self, messages, *, params, model=None, schema=None) -> Completion:
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        asked = next(m["content"] for m in messages if "New fact: <<<" in m["content"])  # a re-ask repeats the request
        said = asked.split("New fact: <<<", 1)[1].split(">>>", 1)[0]
        fact = KEPT.get(said, said)
        keep = json.dumps({"ops": [{"op": "ADD", "text": fact}]})
        sloppy = "not json at all" if fact in FACTS[::3] else keep  # every third fact, re-asked or not
        body = {"manager-good": keep, "manager-sloppy": sloppy}.get(model or "", '{"ops": [{"op": "NOOP"}]}')
        text = body[len(prefix) :] if body.startswith(prefix) else body
        return Completion(model=model or self.model, choices=[Choice(text=text)], prompt_tokens=10, completion_tokens=5)


#: the first fact of an empty bank is added without asking the manager: a greeting takes that place
OPENING = {"speaker": "Caroline", "text": "Hi everyone, I am Caroline."}


def judged_traffic(client) -> None:
    """The app's traffic: each turn ingested (the base manager keeps no fact, so only the
    episodic turns answer), then a question about it, judged with the fact as gold."""
    client.ingest(OPENING, scope=SCOPE)
    for text, _, _ in TURNS:
        client.ingest({"speaker": "Caroline", "text": text}, scope=SCOPE)
    for _, question, fact in TURNS:
        client.feedback(client.answer(question, scope=SCOPE).trajectory_id, gold=fact)


@pytest.fixture
def managed(make_client, tmp_path):
    ckpt = tmp_path / "ckpt"
    for version in ("good", "bad", "sloppy"):
        publish(ckpt, "manager", version)
    policies = {"extractor": "heuristic", "manager": "llm", "answerer": FactAnswerer()}
    client = make_client(backend=ManagerBackend(), checkpoint_dir=ckpt, policies=policies)
    judged_traffic(client)
    return client


def test_manager_states_are_the_logged_ingests_judged_answers_cited(managed) -> None:
    cases = log_manager_cases(managed.log, managed.bank)
    assert len(cases) == len(TURNS) and all(isinstance(c, ManagerCase) for c in cases)
    for case, (text, question, fact) in zip(cases, TURNS):
        assert case.facts == (f"Caroline: {text}",) and case.qa == ((question, fact),)
        assert text not in [r.text for r in case.before.records()]  # the bank before its own turn


def test_a_manager_that_keeps_what_users_ask_about_passes(managed) -> None:
    decision = managed.promote("manager", "good", on="log")
    assert decision is not None and decision.passed and decision.on == "log"
    assert decision.paired.wins == len(TURNS) and decision.candidate.mean == 1.0 and decision.incumbent.mean == 0.0
    assert decision.candidate.guards == {"parse_failure_rate": 0.0, "rejected_op_rate": 0.0}
    assert managed.policies["manager"].version == "good"
    kept = [r.text for r in managed.list(scope=SCOPE, tier="semantic")]
    assert kept == ["Caroline: Hi everyone, I am Caroline."]  # replayed on forks: the real bank holds none of good's facts


def test_a_manager_no_better_or_worse_is_kept_out(managed) -> None:
    with pytest.raises(GateFailed, match="not above the margin") as failed:
        managed.promote("manager", "bad", on="log")
    assert failed.value.decision.paired.ties == len(TURNS)
    managed.promote("manager", "good", on="log")
    with pytest.raises(GateFailed):
        managed.promote("manager", "bad", on="log")  # loses every state to the incumbent
    assert managed.registry.decision("manager", "bad").paired.losses == len(TURNS)
    assert managed.policies["manager"].version == "good"


def test_a_better_reward_does_not_excuse_a_guard_regression(managed) -> None:
    with pytest.raises(GateFailed, match="parse_failure_rate") as failed:
        managed.promote("manager", "sloppy", on="log")
    decision = failed.value.decision
    assert decision.paired.ci_low > 0 and decision.paired.wins == 4  # better on reward alone
    assert decision.candidate.guards["parse_failure_rate"] == pytest.approx(2 / 6) and decision.incumbent.guards["parse_failure_rate"] == 0.0
    assert managed.policies["manager"].version == "base"


def test_the_manager_gate_wants_log_states(managed) -> None:
    with pytest.raises(InvalidInput, match="app's own traffic"):
        managed.evaluate_policy("manager", "good", on="locomo-val")
    with pytest.raises(InvalidInput, match="ManagerCase"):
        managed.evaluate_policy("manager", "good", on=[object()])
    with pytest.raises(InvalidInput, match="not the extractor"):
        managed.evaluate_policy("extractor", "v1", on="log")
    cases = log_manager_cases(managed.log, managed.bank)
    decision = managed.evaluate_policy("manager", "good", on=cases[:3])  # the held-out part a trainer passes
    assert decision.on == "3 given states" and managed.policies["manager"].version == "base"


def test_the_async_twin_gates_the_manager_the_same_way(tmp_path) -> None:
    AsyncManagerBackend = async_twin(ManagerBackend)
    ckpt = tmp_path / "ckpt"
    for version in ("good", "bad"):
        publish(ckpt, "manager", version)
    policies = {"extractor": "heuristic", "manager": "llm", "answerer": FactAnswerer()}

    async def main() -> None:
        async with AsyncMemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), backend=AsyncManagerBackend(), checkpoint_dir=ckpt, policies=policies) as client:
            await client.ingest(OPENING, scope=SCOPE)
            for text, _, _ in TURNS:
                await client.ingest({"speaker": "Caroline", "text": text}, scope=SCOPE)
            for _, question, fact in TURNS:
                await client.feedback((await client.answer(question, scope=SCOPE)).trajectory_id, gold=fact)
            with pytest.raises(GateFailed):
                await client.promote("manager", "bad", on="log")
            decision = await client.promote("manager", "good", on="log")
            assert decision is not None and decision.passed and client.policies["manager"].version == "good"

    asyncio.run(main())
