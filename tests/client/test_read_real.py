"""MemoryClient.read on SmolLM2-135M in-process: a document longer than the model's 2,048-token
context is read chunk by chunk. What a 135M model writes is not asserted; that the read
finishes, every request fits the context, and the memory is bounded and stored, is."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsdk import LLMSpec, MemoryClient
from memsdk.policies.reader import CHARS_PER_TOKEN, approx_tokens

pytestmark = pytest.mark.slow

PEOPLE = ["Ann", "Bilal", "Chen", "Dora", "Emeka", "Fatima", "Goran", "Hana"]
DOCUMENT = " ".join(
    f"In {1990 + i}, {PEOPLE[i % 8]} moved to a town called Port {chr(65 + i % 26)}{i} and worked there as a baker for {i % 7 + 1} years before opening a shop."
    for i in range(90)
)


def test_a_document_longer_than_the_context_is_read_into_a_bounded_core_memory(tmp_path: Path, transformers_backend) -> None:
    assert approx_tokens(DOCUMENT) > 2048  # longer than SmolLM2's whole context window
    with MemoryClient(data_dir=tmp_path, policies={"extractor": "heuristic", "manager": "heuristic", "answerer": "heuristic", "reader": LLMSpec(backend=transformers_backend, fallback=False)}) as client:
        result = client.read(DOCUMENT, scope={"user_id": "doc"}, budget_tokens=48, chunk_tokens=768, progress=False)
        core = client.list(scope={"user_id": "doc"}, tier="core")
    print(f"\n{result.chunks} chunks, {result.prompt_tokens} prompt tokens, kept_old={result.kept_old}, {result.latency_s:.1f} s: {result.text!r}")
    assert result.chunks >= 3 and not result.fallback
    assert result.prompt_tokens / result.chunks < 2048  # each request fits the context
    assert 0 < len(result.text) <= 48 * CHARS_PER_TOKEN and [m.text for m in core] == [result.text]
