"""Per-role policies: a spec per role, user-written policies through the same guard and
audit trail as the built-ins, and fallback per role. Scripted backends, hashing embedder."""

from __future__ import annotations

import json
import re

import pytest

from memsdk import AsyncMemoryClient, ClientConfig, InvalidInput, MemoryClient, PolicyError
from memsdk.embedding import HashEmbedder
from memsdk.config.roles import LLMSpec
from memsdk.policies.answerer import ABSTAIN_TEXT
from memsdk.types import Op, Tier

from tests.policies.conftest import AsyncScripted, ScriptedBackend

ALICE, BOB = {"user_id": "alice"}, {"user_id": "bob"}
CARD = re.compile(r"\b\d{13,19}\b")


class MaskCards:
    """A rule-based manager with a domain rule: card numbers are masked before a fact is stored."""

    role = "manager"
    version = "1"

    def decide(self, facts, related, *, source_turn_ids):
        return [{"op": "ADD", "text": CARD.sub("[card]", fact)} for fact in facts]  # dicts are validated as ops


class Trespasser:
    """A manager that learned another user's memory id and tries to reach it, and tries to
    write where a manager may not (a turn, the core memory)."""

    role = "manager"

    def __init__(self) -> None:
        self.victim = None

    def decide(self, facts, related, *, source_turn_ids):
        return [
            Op.update(self.victim, "alice wrote this into bob's memory"),
            Op.delete(self.victim),
            {"op": "ADD", "text": "a fake turn", "tier": "episodic"},
            Op.add("a fake core memory", tier=Tier.CORE),
        ]


class QuotedAnswerer:
    """An LLM answerer without I/O of its own: builds the request, reads the reply."""

    role = "answerer"

    def request(self, question, memories):
        shown = "\n".join(m.record.text for m in memories[:5])
        return [{"role": "system", "content": "Answer from the notes."}, {"role": "user", "content": f"{shown}\nQ: {question}"}]

    def read(self, reply, question, memories):
        found = re.search(r'"(.+?)"', reply)
        if found is None:
            raise ValueError(f"no quoted answer in {reply!r}")
        return found.group(1)


def client(tmp_path, **kw) -> MemoryClient:
    return MemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), **kw)


def aclient(tmp_path, **kw) -> AsyncMemoryClient:
    return AsyncMemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), **kw)


# -- the specification ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policies", "field"),
    [
        ({"critic": "heuristic"}, "config.policies.critic"),
        ({"manager": {"base_url": "ftp://x"}}, "config.policies.manager.base_url"),
        ({"manager": {"temperature": 0.7}}, "config.policies.manager.temperature"),
        ({"manager": {"base_url": "http://x", "in_process": True}}, "config.policies.manager"),
        ({"manager": 42}, "config.policies.manager"),
        ({"manager": object()}, "config.policies.manager"),
        ({"manager": QuotedAnswerer()}, "config.policies.manager"),
        ({"manager": "no such policy!"}, "config.policies.manager"),
        ({"manager": "not-installed-anywhere"}, "config.policies.manager"),
        ({"answerer": {"prompt": "manager/v1"}}, "config.policies.answerer.prompt"),
        ({"answerer": '{"model": '}, "config.policies.answerer"),
        ("llmx", "config.policies"),
    ],
)
def test_an_invalid_spec_is_invalid_input_naming_the_field(tmp_path, policies, field) -> None:
    with pytest.raises(InvalidInput) as err:
        client(tmp_path, policies=policies)
    assert err.value.field == field


def test_roles_not_named_are_llm_and_shorthands_still_work(tmp_path) -> None:
    config = ClientConfig(data_dir=tmp_path, policies={"extractor": "heuristic"})
    assert (config.policies.extractor, config.policies.manager, config.policies.answerer) == ("heuristic", "llm", "llm")
    assert ClientConfig(data_dir=tmp_path, policies="heuristic").policies == "heuristic"


def test_the_environment_names_policies_per_role(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMSDK_POLICIES", "heuristic")
    monkeypatch.setenv("MEMSDK_POLICY_ANSWERER", '{"base_url": "http://answers:8000", "model": "small"}')
    config = ClientConfig.from_env(data_dir=tmp_path)
    assert config.policies.extractor == config.policies.manager == "heuristic"
    assert config.policies.answerer == LLMSpec(base_url="http://answers:8000", model="small")
    monkeypatch.setenv("MEMSDK_POLICIES", json.dumps({"manager": "heuristic"}))
    monkeypatch.delenv("MEMSDK_POLICY_ANSWERER")
    assert ClientConfig.from_env(data_dir=tmp_path).policies.manager == "heuristic"


# -- a mixed configuration: each role on its own backend ------------------------------------------


def test_each_role_runs_where_its_spec_says(tmp_path) -> None:
    manager_llm = ScriptedBackend('{"ops": [{"op": "NOOP"}]}')
    answer_llm = ScriptedBackend('{"answer": "Buddy", "evidence": [0]}')
    policies = {"extractor": "heuristic", "manager": LLMSpec(backend=manager_llm), "answerer": LLMSpec(backend=answer_llm)}
    with client(tmp_path, policies=policies) as c:
        c.ingest([{"speaker": "alice", "text": "I adopted a dog named Buddy"}, {"speaker": "alice", "text": "I adopted a dog named Buddy last week"}], scope=ALICE, progress=False)
        assert c.answer("What is the dog called?", scope=ALICE).text == "Buddy"
        info = c.policies
    assert len(manager_llm.requests) == 1 and not manager_llm.replies  # the manager asked its own backend
    assert len(answer_llm.requests) == 1 and "What is the dog called?" in answer_llm.requests[0]["messages"][-2]["content"]
    assert (info["extractor"].served_by, info["manager"].model, info["answerer"].model) == ("heuristic", "scripted", "scripted")
    assert info["manager"].version == info["answerer"].version == "base"


def test_roles_with_the_same_endpoint_share_one_backend(tmp_path) -> None:
    made = []

    class Counting(MemoryClient):
        def _make_backend(self, endpoint):
            made.append(endpoint)
            return ScriptedBackend()

    spec = {"base_url": "http://big:8000", "model": "qwen-7b"}
    with Counting(data_dir=tmp_path, embedder=HashEmbedder(64), llm_base_url="http://small:8000", llm_api_key="secret", policies={"extractor": "heuristic", "manager": spec, "answerer": spec}) as c:
        assert c._policies.backend("manager") is c._policies.backend("answerer")
    assert [(e.base_url, e.model, e.api_key) for e in made] == [("http://big:8000", "qwen-7b", None)]  # the client's key stays with its own server


# -- user-written policies: the same guard, transition, history and log ------------------------------


def test_a_rule_manager_runs_through_the_pipeline(tmp_path) -> None:
    with client(tmp_path, policies={"extractor": "heuristic", "manager": MaskCards(), "answerer": "heuristic"}) as c:
        kept = c.ingest({"speaker": "alice", "text": "I moved to Lisbon in May"}, scope=ALICE)
        masked = c.ingest({"speaker": "alice", "text": "my card is 4111111111111111 ok"}, scope=ALICE)
        semantic = [m.text for m in c.list(scope=ALICE, tier="semantic")]
        events = c.history(scope=ALICE, memory_id=kept.ops[0].memory_id)
        logged = list(c.log.read(kind="ingest"))
    assert sorted(semantic) == ["alice: I moved to Lisbon in May", "alice: my card is [card] ok"]
    assert kept.policy_versions["manager"] == "MaskCards@1" and c.policies["manager"].served_by == "rules"
    assert events[0].actor.role == "manager" and events[0].actor.version == "MaskCards@1"  # the audit trail names the policy
    assert masked.ops[0].after == "alice: my card is [card] ok" and masked.ops[0].version == 1
    assert {t.policy_versions["manager"] for t in logged} == {"MaskCards@1"}


def _trespass(c, trespasser: Trespasser) -> tuple:
    bob = c.add("bob's PIN is 4321", scope=BOB)
    trespasser.victim = bob.id
    c.add("alice likes tea", scope=ALICE)
    return bob


def _check_refused(c, result, bob) -> None:
    assert result.ops == []
    refusals = " | ".join(result.failures)
    assert "was not shown it" in refusals and "second op" not in refusals
    assert "ADD to the episodic tier refused" in refusals and "ADD to the core tier refused" in refusals
    assert c.get(bob.id, scope=BOB).text == "bob's PIN is 4321" and len(c.history(scope=BOB)) == 1
    assert [m.text for m in c.list(scope=ALICE, tier="semantic")] == ["alice likes tea"]
    assert c.policy_stats["manager"]["rejected_ops"] == 4


def test_a_plugged_manager_cannot_write_outside_its_scope_or_tier(tmp_path) -> None:
    trespasser = Trespasser()
    with client(tmp_path, policies={"extractor": "heuristic", "manager": trespasser, "answerer": "heuristic"}) as c:
        bob = _trespass(c, trespasser)
        result = c.ingest({"speaker": "alice", "text": "alice likes green tea a lot"}, scope=ALICE)
        _check_refused(c, result, bob)
        logged = list(c.log.read(kind="ingest"))[-1]
        assert any("was not shown it" in f for f in logged.output["failures"])


async def test_the_async_client_guards_a_plugged_manager_the_same_way(tmp_path) -> None:
    trespasser = Trespasser()
    async with aclient(tmp_path, policies={"extractor": "heuristic", "manager": trespasser, "answerer": "heuristic"}) as c:
        bob = await c.add("bob's PIN is 4321", scope=BOB)
        trespasser.victim = bob.id
        await c.add("alice likes tea", scope=ALICE)
        result = await c.ingest({"speaker": "alice", "text": "alice likes green tea a lot"}, scope=ALICE)
        assert result.ops == [] and sum("refused" in f for f in result.failures) == 4
        assert (await c.get(bob.id, scope=BOB)).text == "bob's PIN is 4321"
        assert c.policy_stats["manager"]["rejected_ops"] == 4


class Crashing:
    role = "extractor"

    def extract(self, turn, context):
        raise RuntimeError("my regex blew up")


class WrongType:
    role = "manager"

    def decide(self, facts, related, *, source_turn_ids):
        return {"op": "ADD", "text": "not a list"}


class BadOp:
    role = "manager"

    def decide(self, facts, related, *, source_turn_ids):
        return [{"op": "UPDATE", "text": "no target"}]


@pytest.mark.parametrize(
    ("policies", "said"),
    [
        ({"extractor": Crashing()}, "Crashing raised RuntimeError: my regex blew up"),
        ({"extractor": "heuristic", "manager": WrongType()}, "WrongType returned a result of type dict"),
        ({"extractor": "heuristic", "manager": BadOp()}, "ops[0]"),
    ],
)
def test_a_failing_plugged_policy_costs_only_its_decision(tmp_path, policies, said) -> None:
    with client(tmp_path, policies={"manager": "heuristic", "answerer": "heuristic", **policies}) as c:
        result = c.ingest({"speaker": "alice", "text": "I moved to Lisbon in May"}, scope=ALICE)
        assert any(said in f for f in result.failures), result.failures
        assert [m.text for m in c.list(scope=ALICE, tier="episodic")] == ["I moved to Lisbon in May"]


def test_a_prompt_policy_is_served_logged_and_read_safely(tmp_path) -> None:
    backend = ScriptedBackend('The answer is "Lisbon".', "I cannot say")
    with client(tmp_path, policies={"extractor": "heuristic", "manager": "heuristic", "answerer": QuotedAnswerer()}, backend=backend) as c:
        c.ingest({"speaker": "alice", "text": "I moved to Lisbon in May"}, scope=ALICE)
        good = c.answer("Where did alice move?", scope=ALICE)
        bad = c.answer("Where did alice move?", scope=ALICE)
        calls = [t.calls[0] for t in c.log.read(kind="answer")]
        assert c.policy_stats["answerer"]["parse_failures"] == 1 and c.policies["answerer"].prompt == "custom: QuotedAnswerer"
    # a reply that cannot be read answers nothing: an abstention, never a guess
    assert (good.text, good.abstained, bad.text, bad.abstained, good.prompt_tokens) == ("Lisbon", False, ABSTAIN_TEXT, True, 100)
    assert "Lisbon" in backend.requests[0]["messages"][-1]["content"]
    assert calls[0]["parsed"] == {"answer": "Lisbon"} and "no quoted answer" in calls[1]["failure"]


# -- fallback and versions per role ------------------------------------------------------------------


def test_only_the_role_whose_backend_is_down_falls_back(tmp_path) -> None:
    down = ScriptedBackend(down=True)
    up = ScriptedBackend('{"answer": "Lisbon", "evidence": [0]}')
    with client(tmp_path, policies={"extractor": "heuristic", "manager": LLMSpec(backend=down), "answerer": LLMSpec(backend=up)}) as c:
        c.add("alice moved to Lisbon", scope=ALICE)
        result = c.ingest({"speaker": "alice", "text": "alice moved to Lisbon in May"}, scope=ALICE)
        answer = c.answer("Where did alice move?", scope=ALICE)
        stats = c.policy_stats
    assert result.fallback and not answer.fallback and answer.text == "Lisbon"
    assert stats["manager"]["fallbacks"] == 1 and stats["answerer"].get("fallbacks", 0) == 0


async def test_a_role_without_fallback_reports_its_failure_and_keeps_the_turn(tmp_path) -> None:
    down = AsyncScripted(down=True)
    async with aclient(tmp_path, policies={"extractor": "heuristic", "manager": LLMSpec(backend=down, fallback=False), "answerer": "heuristic"}) as c:
        await c.add("alice moved to Lisbon", scope=ALICE)
        result = await c.ingest({"speaker": "alice", "text": "alice moved to Lisbon in May"}, scope=ALICE)
        assert not result.fallback and any("manager failed" in f for f in result.failures)
        assert len(await c.list(scope=ALICE, tier="episodic")) == 1


class AdapterBackend(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def load_lora_adapter(self, name, path) -> None:
        self.loaded.append(name)


def test_versions_switch_per_role_on_that_roles_backend(tmp_path) -> None:
    from memsdk.registry import PolicyManifest, PolicyRegistry

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    PolicyRegistry(tmp_path / "ckpt").publish(adapter, PolicyManifest(role="answerer", version="v1", base_model="smollm2"))
    default, answers = AdapterBackend(), AdapterBackend()
    with client(tmp_path, backend=default, checkpoint_dir=tmp_path / "ckpt", policies={"extractor": SkipCards(), "answerer": LLMSpec(backend=answers)}) as c:
        c.use_policy("answerer", "v1")
        assert (answers.loaded, default.loaded, c.policies["answerer"].version) == (["answerer-v1"], [], "v1")
        with pytest.raises(PolicyError, match="has no checkpoints"):
            c.use_policy("extractor", "v1")


class SkipCards:
    role = "extractor"

    def extract(self, turn, context):
        return [] if CARD.search(turn.text) else [turn.text]


def test_a_pinned_version_is_served_from_the_start(tmp_path) -> None:
    from memsdk.registry import PolicyManifest, PolicyRegistry

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    PolicyRegistry(tmp_path / "ckpt").publish(adapter, PolicyManifest(role="manager", version="v2", base_model="smollm2"))
    backend = AdapterBackend()
    with client(tmp_path, checkpoint_dir=tmp_path / "ckpt", policies={"manager": LLMSpec(backend=backend, version="v2")}, backend=ScriptedBackend()) as c:
        assert c.policies["manager"].version == "v2" and backend.loaded == ["manager-v2"]


@pytest.mark.slow  # the CLI's client loads MiniLM
def test_the_cli_takes_a_policy_per_role(tmp_path, capsys) -> None:
    from memsdk.cli import main

    assert main(["--data-dir", str(tmp_path), "--policies", "heuristic", "--policy", "answerer=heuristic", "policies"]) == 0
    assert json.loads(capsys.readouterr().out)["answerer"]["served_by"] == "heuristic"
    assert main(["--data-dir", str(tmp_path), "--policy", "critic=heuristic", "policies"]) == 2
    assert "config.policies.critic" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "--policy", "answerer", "policies"]) == 2
    assert "--policy: expected ROLE=SPEC" in capsys.readouterr().err

