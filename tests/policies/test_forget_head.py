"""The trained forget heads: features and probabilities by hand, the effects they yield, the
ops a relevance match plans, the shipped head's manifest, and the recipe on a tiny corpus."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memsdk.effects import Call, run
from memsdk.embedding import HashEmbedder
from memsdk.pipeline.forget import Forget, supersede_ops
from memsdk.pipeline.forget_head import DEFAULT_HEAD_DIR, FEATURES, INTENTS, ForgetHead, ForgetReader, relevance_features
from memsdk.types import MemoryRecord, OpType, Scope, Tier, content_hash

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def record(text: str, tier: Tier = Tier.SEMANTIC) -> MemoryRecord:
    return MemoryRecord(id=uuid.uuid4(), text=text, scope=Scope(user_id="sam"), created_at=NOW, updated_at=NOW, version=1, content_hash=content_hash(text), tier=tier)


def head(dim: int = 64, *, forget_bias: float = 0.0, relevance_bias: float = 0.0) -> ForgetHead:
    intent = np.zeros((dim + 1, len(INTENTS)), dtype=np.float32)
    intent[-1] = [0.0, forget_bias, 0.0]
    relevance = np.zeros(len(FEATURES) + 1, dtype=np.float32)
    relevance[-1] = relevance_bias
    return ForgetHead("test", f"hash-{dim}", re.compile(r"\bforget|drop\b", re.I), intent, 0.6, relevance, 0.5)


def test_features_of_a_pair_by_hand() -> None:
    # "phone number" names the kind the memory holds; "number" is the one content word they share
    assert relevance_features("my phone number", "call me on 07700 900123, that's my number", 0.25) == [0.25, 1.0, 0.0, pytest.approx(1 / 3), 1.0]
    assert relevance_features("my knee injury", "I love hiking", 0.1) == [0.1, 0.0, 0.0, 0.0, 0.0]


def test_intent_probabilities_are_a_softmax_of_the_linear_scores() -> None:
    h = head(2)
    h.intent_weights[:2] = [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    probs = h.intent_probs(np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    e = np.exp([[0, 1, 0], [0, 0, 2]])
    np.testing.assert_allclose(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    h.relevance_weights[:] = [2.0, 0, 0, 0, 0, -1.0]
    np.testing.assert_allclose(h.relevance_probs(np.array([[0.5, 0, 0, 0, 0]], dtype=np.float32)), [0.5], rtol=1e-6)


def test_a_turn_without_a_memory_word_costs_no_embedding() -> None:
    reader = ForgetReader(head(forget_bias=5.0), HashEmbedder())
    steps = reader.wants("We went to the lake on Sunday.")
    with pytest.raises(StopIteration) as done:
        next(steps)
    assert done.value.value == "other"
    first = next(reader.wants("Please drop the thing about my divorce."))
    assert isinstance(first, Call)


def test_the_intent_threshold_holds_back_an_unsure_forget() -> None:
    sure, unsure = head(forget_bias=5.0), head(forget_bias=0.5)  # softmax forget ~.99 / ~.45 (< intent_at .6)
    assert run(ForgetReader(sure, HashEmbedder()).wants("drop my divorce")) == "forget"
    assert run(ForgetReader(unsure, HashEmbedder()).wants("drop my divorce")) == "other"


def test_a_reader_needs_the_embedder_its_head_was_trained_on() -> None:
    assert ForgetReader.over(HashEmbedder(64), head(64)) is not None
    assert ForgetReader.over(HashEmbedder(32), head(64)) is None
    assert ForgetReader.over(None, head(64)) is None


def test_relevance_returns_the_records_at_or_above_the_threshold() -> None:
    memories = [record("Nora (on 10 Jan 2024): I'm going through a divorce."), record("I grow tomatoes.")]
    assert set(run(ForgetReader(head(relevance_bias=3.0), HashEmbedder()).about("my divorce", memories))) == {m.id for m in memories}
    assert run(ForgetReader(head(relevance_bias=-3.0), HashEmbedder()).about("my divorce", memories)) == {}
    assert run(ForgetReader(head(), HashEmbedder()).about("my divorce", [])) == {}


def test_a_memory_the_head_matched_is_deleted_whole_and_the_cap_still_holds() -> None:
    divorce = record("Nora: The lawyer says Paul keeps the house. I grow tomatoes.")
    tomatoes = record("I grow tomatoes.")
    request = record("Can you drop everything about it?", Tier.EPISODIC)
    forget = Forget("Can you drop everything about it?", literal=False)
    ops, refused = supersede_ops(forget, [divorce, tomatoes, request], request=request, about={divorce.id})
    assert refused is None
    assert [(op.op, op.target) for op in ops] == [(OpType.DELETE, divorce.id), (OpType.DELETE, request.id)]
    many = [record(f"fact {i}") for i in range(11)]
    assert supersede_ops(forget, many, about={m.id for m in many})[1] is not None


def test_a_whole_turn_never_matches_by_containing_its_words() -> None:
    assert Forget("drop it", literal=False).literal is False
    assert supersede_ops(Forget("drop it", literal=False), [record("drop it")]) == ([], None)


def test_the_shipped_head_says_what_it_was_trained_and_chosen_on() -> None:
    manifest = json.loads((DEFAULT_HEAD_DIR / "manifest.json").read_text())
    loaded = ForgetHead.load()
    assert loaded.embedder_name == manifest["embedder"] and loaded.intent_weights.shape == (385, len(INTENTS))
    assert 0 < loaded.intent_at <= 1 and 0 < loaded.relevance_at <= 1
    assert manifest["chosen_on"] and manifest["data"]["source"] and len(manifest["data"]["authors"]) >= 2


def tiny_forget_corpus(data: Path) -> Path:
    """Two authors' requests and relevance pairs, in the training data's format."""
    data.mkdir()
    for author in "ab":
        requests = [{"text": f"please forget my {w} {author}", "label": "forget", "author": author} for w in ("phone", "knee", "divorce", "salary")]
        requests += [{"text": f"I forgot my {w} at home {author}", "label": "other", "author": author} for w in ("keys", "bag", "hat", "coat")]
        requests += [{"text": f"delete every user {w} {author}", "label": "refuse", "author": author} for w in ("now", "today")]
        pairs = [{"group": f"g{author}{i}", "request": f"forget my {w}", "description": f"my {w}", "memory": m, "relevant": rel, "author": author}
                 for i, (w, m, rel) in enumerate([("knee", "my knee hurts", True), ("knee", "I like tea", False), ("phone", "my phone is 555 0134", True), ("phone", "I ride a bike", False)])]
        (data / f"requests-{author}.jsonl").write_text("\n".join(json.dumps(r) for r in requests))
        (data / f"relevance-{author}.jsonl").write_text("\n".join(json.dumps(p) for p in pairs))
    return data


def test_the_recipe_trains_both_heads_on_a_tiny_corpus(tmp_path: Path) -> None:
    from memsdk_training.recipes.forget_head import ForgetHeadConfig, threshold_at, train

    # the lowest threshold whose positives are right at least 2 times in 3
    assert threshold_at(np.array([0.9, 0.8, 0.7, 0.6]), np.array([True, False, True, False]), 2 / 3) == 0.7
    assert threshold_at(np.array([0.9]), np.array([False]), 0.5) == 1.0
    data = tiny_forget_corpus(tmp_path / "data")
    manifest = train(ForgetHeadConfig(data_dir=data, out_dir=tmp_path / "head", version="tiny"), HashEmbedder())
    loaded = ForgetHead.load(tmp_path / "head")
    assert manifest["data"]["requests"] == {"other": 8, "forget": 8, "refuse": 4} and manifest["data"]["authors"] == ["a", "b"]
    assert loaded.version == "tiny" and loaded.embedder_name == "hash-64"
    assert set(manifest["held_out"]) == {"intent_forget", "relevance"}
