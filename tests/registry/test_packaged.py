"""Adapters shipped inside the package: a second, read-only root of the registry, and the
version a client starts on when nobody chose one (fake adapter folders, scripted backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memsdk.client._base as client_base
from memsdk import ClientConfig, InvalidInput, MemoryClient
from memsdk.serving.policy_set import Backends, PolicySet
from memsdk.embedding import HashEmbedder
from memsdk.config.roles import LLMSpec
from memsdk.registry import PolicyManifest, PolicyRegistry, model_key
from memsdk.gate import GateDecision, SideResult, decide

from tests.client.test_policy_swap import AdapterBackend
from tests.llm._stub_server import Reply, StubServer, chat_body


def shelve(root: Path, role: str, version: str, base_model: str = "smollm2", *, day: int = 1) -> Path:
    """A manifest + adapter folder laid out as the package ships one."""
    folder = root / role / version
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8}))
    manifest = PolicyManifest(role=role, version=version, base_model=base_model, created_at=f"2026-11-{day:02d}T00:00:00Z")
    (folder / "manifest.json").write_text(manifest.model_dump_json())
    return folder


@pytest.fixture
def packaged(tmp_path: Path) -> Path:
    root = tmp_path / "packaged"
    shelve(root, "answerer", "locomo-v1", "HuggingFaceTB/SmolLM2-135M-Instruct")
    return root


def test_model_key_names_one_model_however_it_is_called() -> None:
    names = ["smollm2", "SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "/cache/models/SmolLM2-135M-Instruct/"]
    assert {model_key(n) for n in names} == {"smollm2"}
    assert model_key("Qwen/Qwen2.5-7B-Instruct") != "smollm2"


def test_packaged_versions_are_listed_loaded_and_never_written(tmp_path: Path, packaged: Path) -> None:
    registry = PolicyRegistry(tmp_path / "own", packaged=packaged)
    assert [m.version for m in registry.versions("answerer")] == ["locomo-v1"]
    assert registry.is_packaged("answerer", "locomo-v1")
    manifest = registry.get("answerer", "locomo-v1")
    assert registry.adapter_dir(manifest) == (packaged / "answerer" / "locomo-v1").resolve()
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(InvalidInput, match="already published"):  # a name the package holds
        registry.publish(adapter, PolicyManifest(role="answerer", version="locomo-v1", base_model="smollm2"))
    side = SideResult(version="locomo-v1", rewards=[0.5, 0.6], latency_p50_s=1.0, latency_p95_s=1.0)
    registry.record_decision(decide("answerer", side, side.model_copy(update={"version": "base", "rewards": [0.1, 0.1]}), on="states"))
    assert (tmp_path / "own" / "answerer" / "locomo-v1" / "gate.json").exists()
    assert not (packaged / "answerer" / "locomo-v1" / "gate.json").exists()
    assert registry.decision("answerer", "locomo-v1") is not None
    assert [m.version for m in registry.versions("answerer")] == ["locomo-v1"]  # a gate.json alone is no version


def test_the_packaged_decision_is_read_where_the_registry_has_none(tmp_path: Path, packaged: Path) -> None:
    side = SideResult(version="locomo-v1", rewards=[0.5], latency_p50_s=1.0, latency_p95_s=1.0)
    decision: GateDecision = decide("answerer", side, side.model_copy(update={"version": "base", "rewards": [0.1]}), on="locomo-val")
    (packaged / "answerer" / "locomo-v1" / "gate.json").write_text(decision.model_dump_json())
    found = PolicyRegistry(tmp_path / "own", packaged=packaged).decision("answerer", "locomo-v1")
    assert found is not None and found.on == "locomo-val"


def test_a_published_version_shadows_a_packaged_one_of_the_same_name(tmp_path: Path, packaged: Path) -> None:
    shelve(tmp_path / "own", "answerer", "locomo-v1", "smollm2", day=20)
    registry = PolicyRegistry(tmp_path / "own", packaged=packaged)
    assert not registry.is_packaged("answerer", "locomo-v1")
    assert registry.adapter_dir(registry.get("answerer", "locomo-v1")) == (tmp_path / "own" / "answerer" / "locomo-v1").resolve()
    assert registry.packaged_default("answerer", "smollm2") is None  # the package's own was shadowed


def test_packaged_default_is_the_newest_one_trained_over_the_model(tmp_path: Path, packaged: Path) -> None:
    shelve(packaged, "answerer", "locomo-v2", "smollm2", day=15)
    shelve(packaged, "answerer", "qwen-v1", "Qwen/Qwen2.5-7B-Instruct", day=28)
    registry = PolicyRegistry(tmp_path / "own", packaged=packaged)
    assert registry.packaged_default("answerer", "/cache/models/SmolLM2-135M-Instruct").version == "locomo-v2"
    assert registry.packaged_default("answerer", "Qwen2.5-7B-Instruct").version == "qwen-v1"
    assert registry.packaged_default("manager", "smollm2") is None
    assert PolicyRegistry(tmp_path / "own").packaged_default("answerer", "smollm2") is None  # no packaged root: none


def policy_set(tmp_path: Path, packaged: Path, *, injected: bool = False, **config) -> PolicySet:
    c = ClientConfig(data_dir=tmp_path / "data", **config)
    (tmp_path / "data").mkdir(exist_ok=True)
    backends = Backends(c, lambda endpoint: AdapterBackend(), injected=AdapterBackend() if injected else None)
    return PolicySet(backends, c, PolicyRegistry(c.checkpoints, packaged=packaged), c.data_dir / "active_policies.json")


def test_a_client_starts_on_the_packaged_adapter_only_where_it_applies(tmp_path: Path, packaged: Path) -> None:
    assert policy_set(tmp_path, packaged).start_versions() == {"answerer": "locomo-v1"}
    assert policy_set(tmp_path, packaged, model="SmolLM2-135M-Instruct").start_versions() == {"answerer": "locomo-v1"}
    assert policy_set(tmp_path, packaged, model="qwen2.5-7b").start_versions() == {}  # trained over another model
    assert policy_set(tmp_path, packaged, injected=True).start_versions() == {}  # an injected backend's model is unknown
    assert policy_set(tmp_path, packaged, policies={"answerer": "heuristic"}).start_versions() == {}
    assert policy_set(tmp_path, packaged, policies={"answerer": LLMSpec(prompt="answerer/v2")}).start_versions() == {}  # not its prompt
    assert policy_set(tmp_path, packaged, policies={"answerer": LLMSpec(version="base")}).start_versions() == {}  # pinned: the opt-out per role
    assert policy_set(tmp_path, packaged, policies={"answerer": LLMSpec(model="qwen2.5-7b", base_url="http://x")}).start_versions() == {}


def test_a_switch_back_to_base_outlives_a_restart_a_start_does_not(tmp_path: Path, packaged: Path) -> None:
    state = tmp_path / "data" / "active_policies.json"
    first = policy_set(tmp_path, packaged)
    first.commit(first.plan("answerer", "locomo-v1"), starting=True)
    assert json.loads(state.read_text())["chosen"] == []  # started on it: nobody chose it
    assert policy_set(tmp_path, packaged).start_versions() == {"answerer": "locomo-v1"}
    first.commit(first.plan("answerer", "base"))  # the user's choice
    assert policy_set(tmp_path, packaged).start_versions() == {}
    # a state file from before `chosen` was recorded: its base versions were nobody's choice
    state.write_text(json.dumps({"versions": {"answerer": "base", "manager": "base", "extractor": "base"}, "history": {}}))
    assert policy_set(tmp_path, packaged).start_versions() == {"answerer": "locomo-v1"}


def test_the_shipped_answerer_is_served_at_the_answer_k_measured_for_it(tmp_path: Path) -> None:
    """locomo-v1 was trained at 30 memories; end to end on LoCoMo val it scores F1 .337 at 20
    against .293 at 30 and .227 at the client's 60, at a third fewer prompt tokens than at 30
    (README), and its gate was run again at 20: a client that starts on it shows 20."""
    from memsdk.registry import PACKAGED_DIR

    ps = policy_set(tmp_path, PACKAGED_DIR)
    assert ps.active().answer_k is None  # base: the client's answer_k
    ps.commit(ps.plan("answerer", "locomo-v1"), starting=True)
    assert ps.active().answer_k == 20
    ps.commit(ps.plan("answerer", "base"))
    assert ps.active().answer_k is None


def test_every_packaged_file_ships_in_the_wheel() -> None:
    """Each file of the packaged adapters is matched by a package-data glob of pyproject.toml
    (else an installed memsdk would list a version whose adapter is missing)."""
    import tomllib
    from pathlib import PurePosixPath

    from memsdk.registry import PACKAGED_DIR

    root = PACKAGED_DIR.parents[1]  # memsdk/
    globs = tomllib.loads((root.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["memsdk"]
    shipped = [p for p in PACKAGED_DIR.rglob("*") if p.is_file()]
    assert {"manifest.json", "adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in shipped}
    for path in shipped:
        rel = PurePosixPath(path.relative_to(root).as_posix())
        assert any(rel.match(g) and len(rel.parts) == len(PurePosixPath(g).parts) for g in globs), f"{rel} is not package data"


def test_packaged_weights_are_fp16_and_small() -> None:
    """What `benchmarks/train_answerer_cpu.py --package` writes: fp16 tensors, each file under
    the repository's 5 MB limit (the fp32 adapter is 7.4 MB)."""
    from safetensors import safe_open

    from memsdk.registry import PACKAGED_DIR

    for weights in PACKAGED_DIR.rglob("adapter_model.safetensors"):
        assert weights.stat().st_size < 5_000_000, weights
        with safe_open(str(weights), "pt") as f:
            assert {f.get_slice(name).get_dtype() for name in f.keys()} == {"F16"}, weights


def test_auto_serves_the_measured_defaults_for_the_model(tmp_path: Path, packaged: Path) -> None:
    def kinds(ps: PolicySet) -> dict[str, str]:
        return {role: ps.served(role).kind for role in ("extractor", "manager", "answerer")}

    # over SmolLM2: the heuristic extractor, the trained pair manager (a policy without an LLM), the LLM answerer
    default = {"extractor": "heuristic", "manager": "rules", "answerer": "llm"}
    assert kinds(policy_set(tmp_path, packaged)) == default
    assert kinds(policy_set(tmp_path, packaged, model="/cache/SmolLM2-135M-Instruct")) == default
    assert policy_set(tmp_path, packaged).version_label("manager") == "pairs-v6"
    bigger = policy_set(tmp_path, packaged, model="Qwen/Qwen2.5-7B-Instruct", llm_base_url="http://vllm:8000")
    assert set(kinds(bigger).values()) == {"llm"} and bigger.start_versions() == {}  # a bigger served model: every role an LLM
    assert set(kinds(policy_set(tmp_path, packaged, injected=True)).values()) == {"llm"}  # the caller's backend: its model is not known
    assert set(kinds(policy_set(tmp_path, packaged, policies="llm")).values()) == {"llm"}  # asked for by name: as before
    # and each says why
    why = {role: info.why for role, info in policy_set(tmp_path, packaged).info().items()}
    assert all(w.startswith("policies='auto': what measured best over smollm2") for w in why.values()), why
    assert "nothing measured for this model" in bigger.info()["answerer"].why
    assert policy_set(tmp_path, packaged, policies="heuristic").info()["manager"].why == "policies='heuristic'"


def test_a_client_says_once_on_stderr_what_it_serves_and_why(tmp_path: Path, packaged: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(client_base, "_ANNOUNCED", set())
    for name in ("a", "b"):  # two clients alike in one process: said once
        MemoryClient(data_dir=tmp_path / name, embedder=HashEmbedder(64), policies="heuristic").close()
    said = capsys.readouterr().err.splitlines()
    assert said == [f"memsdk: {role} {version}: policies='heuristic'" for role, version in (("extractor", "heuristic-v1"), ("manager", "heuristic-v1"), ("answerer", "extractive-v1"))]
    MemoryClient(data_dir=tmp_path / "c", embedder=HashEmbedder(64), policies={"answerer": "heuristic"}, announce=False).close()
    assert capsys.readouterr().err == ""


def test_a_server_without_lora_starts_the_client_on_base_with_one_warning(tmp_path: Path, packaged: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """vLLM started without --enable-lora has no /v1/load_lora_adapter: the client still opens,
    says once why it serves base, and answers on base."""
    monkeypatch.setattr(client_base, "PACKAGED_DIR", packaged)
    no_lora = Reply(404, {"object": "error", "message": "Not Found", "type": "NotFoundError", "code": 404})

    def respond(body: object) -> Reply:
        if isinstance(body, dict) and "messages" in body:
            return Reply(body=chat_body(json.dumps({"answer": "Paris", "evidence": [0]})))
        return no_lora

    with StubServer([respond]) as stub, MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), llm_base_url=stub.url) as client:
        client.add("Anne lives in Paris", scope={"user_id": "sam"})
        answer = client.answer("Where does Anne live?", scope={"user_id": "sam"})
        assert client.policies["answerer"].version == "base"
        assert "locomo-v1 could not be loaded" in client.policies["answerer"].why and "the base model serves" in client.policies["answerer"].why
        assert answer.text == "Paris" and not answer.fallback
        assert [path for _, path, _ in stub.requests].count("/v1/load_lora_adapter") == 1  # a 404 is not retried
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "could not restore answerer locomo-v1" in warnings[0], warnings
