"""The client end to end on real parts: MiniLM, the embedded Qdrant engine, SmolLM2 in-process
and on the real vLLM server, and LoRA hot-swap on both.

A 135M model decides poorly, so these tests assert what must hold whatever it decides: the
turn is never lost, every change has its history record, the log holds complete
trajectories the training package reads back, and a swapped-in adapter really serves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsdk import MemoryClient
from memsdk.llm import SamplingParams
from memsdk.registry import PolicyManifest, PolicyRegistry

CONVERSATION = [
    {"speaker": "Caroline", "text": "I went to a LGBTQ support group yesterday and it was so powerful.", "timestamp": "8 May, 2023", "turn_id": "D1:1"},
    {"speaker": "Melanie", "text": "Wow! I'm painting a lake sunrise for my kids this week.", "timestamp": "8 May, 2023", "turn_id": "D1:2"},
    {"speaker": "Caroline", "text": "I'm keen on counseling, I want to work in mental health.", "timestamp": "25 May, 2023", "turn_id": "D2:1"},
    {"speaker": "Melanie", "text": "I ran a charity race for mental health last Saturday.", "timestamp": "25 May, 2023", "turn_id": "D2:2"},
]
SPEAKERS = [{"user_id": "caroline", "run_id": "conv"}, {"user_id": "melanie", "run_id": "conv"}]


def speaker_scope(turn) -> dict:
    return {"user_id": turn.speaker.lower(), "run_id": "conv"}


def assert_nothing_lost_without_history(client: MemoryClient) -> None:
    for scope in SPEAKERS:
        records = {r.id: r for r in client.list(scope=scope, include_deleted=True)}
        events = client.history(scope=scope)
        assert {e.memory_id for e in events} == set(records)
        for rid, rec in records.items():
            mine = [e for e in events if e.memory_id == rid]
            assert mine[0].event == "ADD" and len(mine) == rec.version  # one event per version step
            assert (mine[-1].event == "DELETE") == rec.deleted


def run_conversation(client: MemoryClient) -> None:
    results = client.ingest(CONVERSATION, scope=speaker_scope)
    assert len(results) == 4 and all(r.trajectory_id for r in results)
    for turn, r in zip(CONVERSATION, results):
        print(f"[{turn['turn_id']}] facts={r.facts} ops={[(o.op, o.after) for o in r.ops]} failures={r.failures}")
    answer = client.answer("What does Caroline want to work in?", scope=SPEAKERS)
    print("answer:", answer.text, [e.text for e in answer.evidence])
    assert isinstance(answer.text, str) and answer.text and answer.retrieved > 0
    client.feedback(answer.trajectory_id, gold="mental health")
    assert_nothing_lost_without_history(client)


def check_log_after_restart(make: callable) -> None:
    from memsdk_training.env import log_states

    with make() as client:
        trajectories = list(client.log.read())
        assert [t.kind for t in trajectories] == ["ingest"] * 4 + ["answer"]
        for t in trajectories[:4]:
            roles = [c["role"] for c in t.calls]
            assert roles[0] == "extractor" and t.policy_versions["manager"] == "base"
            assert all(c["messages"] and c["raw_output"] is not None and c["prompt_tokens"] > 0 for c in t.calls)
        answer = trajectories[-1]
        assert answer.calls[0]["role"] == "answerer" and answer.feedback[0].gold == "mental health"
        states = list(log_states(client.log, client.bank))  # the training package reads the log back
        assert all(s.qa[0].answer == "mental health" for s in states)
        assert_nothing_lost_without_history(client)


@pytest.mark.slow
def test_embedded_default_end_to_end(tmp_path: Path, transformers_backend) -> None:
    def make() -> MemoryClient:
        # the embedded default (edge store, MiniLM, SmolLM2 in-process); the session's loaded
        # model is passed in so the suite loads it once
        return MemoryClient(data_dir=tmp_path, backend=transformers_backend)

    with make() as client:
        run_conversation(client)
    check_log_after_restart(make)


@pytest.mark.vllm
def test_vllm_server_end_to_end(tmp_path: Path, vllm_server) -> None:
    def make() -> MemoryClient:
        return MemoryClient(data_dir=tmp_path, llm_base_url=vllm_server.base_url, model="smollm2", policies="llm")

    with make() as client:
        assert client.policies["manager"].model == "smollm2"
        run_conversation(client)
    check_log_after_restart(make)


@pytest.mark.slow
def test_buddy_and_scout_through_the_pipeline(tmp_path: Path, transformers_backend) -> None:
    pets = {"user_id": "sam"}
    with MemoryClient(data_dir=tmp_path, backend=transformers_backend) as client:
        first = client.ingest({"speaker": "Sam", "text": "I have a dog named Buddy."}, scope=pets)
        second = client.ingest({"speaker": "Sam", "text": "I adopted another dog named Scout!"}, scope=pets)
        for r in (first, second):
            print("facts:", r.facts, "ops:", [(o.op, o.before, o.after) for o in r.ops], "failures:", r.failures)
        records = {r.id: r for r in client.list(scope=pets, include_deleted=True)}
        events = client.history(scope=pets)
        assert {e.memory_id for e in events} == set(records)  # no memory without its history
        for e in events:
            print("history:", e.event, repr(e.before), "->", repr(e.after), "by", e.actor)
        for op in first.ops:  # whatever the model did, what it wrote about Buddy is recoverable
            assert op.memory_id in records


def swap_and_compare(client: MemoryClient, adapter_dir: Path, checkpoint_dir: Path) -> None:
    client.add("Caroline went to a support group on 7 May 2023", scope=SPEAKERS[0])
    before = client.answer("When did Caroline go to the support group?", scope=SPEAKERS[0])
    PolicyRegistry(checkpoint_dir).publish(adapter_dir, PolicyManifest(role="answerer", version="lora1", base_model="smollm2"))
    client.use_policy("answerer", "lora1")
    after = client.answer("When did Caroline go to the support group?", scope=SPEAKERS[0])
    trajectories = list(client.log.read(kind="answer"))
    calls = [t.calls[0] for t in trajectories]
    print("base:", calls[0]["raw_output"][:80], "| lora:", calls[1]["raw_output"][:80])
    assert calls[0]["policy_version"].endswith("@smollm2") and calls[1]["policy_version"].endswith("@answerer-lora1")
    assert after.policy_versions["answerer"] == "lora1" and before.policy_versions["answerer"] == "base"
    assert calls[0]["raw_output"] != calls[1]["raw_output"]  # the random adapter changes what the model says
    client.rollback("answerer")
    assert client.policies["answerer"].version == "base"


@pytest.mark.slow
def test_hot_swap_in_process(tmp_path: Path, smollm2_dir: Path, lora_adapter_dir: Path) -> None:
    from memsdk.llm import TransformersBackend

    # its own copy: adapters stay out of the shared fixture; injected, so closed here, not by the client
    with TransformersBackend(smollm2_dir, num_threads=1) as backend, MemoryClient(data_dir=tmp_path / "d", backend=backend, checkpoint_dir=tmp_path / "ckpt") as client:
        swap_and_compare(client, lora_adapter_dir, tmp_path / "ckpt")


@pytest.mark.vllm
def test_hot_swap_on_the_vllm_server(tmp_path: Path, vllm_server, lora_adapter_dir: Path) -> None:
    # from base, not the packaged adapter the client would start on: the comparison is base vs lora1
    with MemoryClient(data_dir=tmp_path / "d", llm_base_url=vllm_server.base_url, checkpoint_dir=tmp_path / "ckpt", packaged_adapters=False) as client:
        swap_and_compare(client, lora_adapter_dir, tmp_path / "ckpt")
        backend = client._backend
        assert "answerer-lora1" in backend.list_models()  # loaded on the server by /v1/load_lora_adapter
        backend.unload_lora_adapter("answerer-lora1")


def test_sampling_params_default_is_greedy() -> None:
    assert SamplingParams().temperature == 0.0  # the swap comparison relies on deterministic decoding


def assert_serves_the_packaged_answerer(client: MemoryClient) -> None:
    """A client that made its SmolLM2 backend itself starts on the answerer adapter the package
    ships, and answers through it: the logged call names the adapter, the answer is bounded."""
    shipped = client.registry.packaged_default("answerer", "smollm2")
    assert shipped is not None and client.registry.is_packaged("answerer", shipped.version)
    assert client.policies["answerer"].version == shipped.version and client.policies["answerer"].model == f"answerer-{shipped.version}"
    client.add("Caroline went to a support group on 7 May 2023", scope=SPEAKERS[0])
    a = client.answer("When did Caroline go to the support group?", scope=SPEAKERS[0])
    call = next(iter(client.log.read(kind="answer"))).calls[0]
    assert a.policy_versions["answerer"] == shipped.version and call["policy_version"].endswith(f"@answerer-{shipped.version}")
    assert len(a.text) <= 100


@pytest.mark.slow
def test_the_packaged_answerer_serves_in_process_by_default(tmp_path: Path) -> None:
    policies = {"extractor": "heuristic", "manager": "heuristic", "answerer": "llm"}
    with MemoryClient(data_dir=tmp_path / "d", policies=policies) as client:
        assert_serves_the_packaged_answerer(client)
        client.use_policy("answerer", "base")  # the user's choice: kept across a restart
    with MemoryClient(data_dir=tmp_path / "d", policies=policies) as client:
        assert client.policies["answerer"].version == "base"
    with MemoryClient(data_dir=tmp_path / "e", policies=policies, packaged_adapters=False) as client:
        assert client.policies["answerer"].version == "base" and client.registry.packaged_default("answerer", "smollm2") is None


@pytest.mark.vllm
def test_the_packaged_answerer_serves_on_the_vllm_server_by_default(tmp_path: Path, vllm_server) -> None:
    with MemoryClient(data_dir=tmp_path / "d", llm_base_url=vllm_server.base_url) as client:
        assert_serves_the_packaged_answerer(client)
