"""The forget cross-encoder: its recipe on a tiny corpus (real MiniLM, a real LoRA fit), the
folder it writes, the effects its reader yields, which reader a client serves, and the
shipped version's manifest. Nothing here asserts that a model fitted on twenty turns reads
well: only what holds whatever it learned."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memsdk.effects import Call, run
from memsdk.embedding import HashEmbedder, SentenceTransformerEmbedder
from memsdk.pipeline.forget_cross import DEFAULT_CROSS_DIR, CrossForgetReader, ForgetCross, packaged_reader
from memsdk.pipeline.forget_head import INTENTS
from tests.policies.test_forget_head import record, tiny_forget_corpus

pytest.importorskip("peft")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[ForgetCross, dict, Path]:
    from memsdk_training.recipes.forget_cross import ForgetCrossConfig, train

    root = tmp_path_factory.mktemp("forget-cross")
    config = ForgetCrossConfig(data_dir=tiny_forget_corpus(root / "data"), out_dir=root / "model", version="tiny", epochs=1, batch_size=8, progress=False)
    provenance = train(config)
    return ForgetCross.load(root / "model"), provenance, root / "model"


def test_the_recipe_writes_a_folder_that_loads_with_its_thresholds(trained: tuple[ForgetCross, dict, Path]) -> None:
    model, provenance, folder = trained
    manifest = json.loads((folder / "manifest.json").read_text())
    assert model.version == "tiny" and model.embedder == SentenceTransformerEmbedder().name
    assert model.intent_at == manifest["intent_at"] and model.relevance_at == manifest["relevance_at"]
    assert 0.0 <= model.intent_at <= 1.0 and 0.0 <= model.relevance_at <= 1.0
    assert set(provenance["held_out"]) == {"intent", "relevance", "relevance_with_drawn_negatives"} and provenance["data"]["authors"] == ["a", "b"]
    held = [json.loads(line) for line in (folder / "held_out.jsonl").read_text().splitlines()]
    assert {h["author"] for h in held} == {"a", "b"} and all(0.0 <= h["score"] <= 1.0 for h in held)
    assert provenance["data"]["requests"] == {"other": 8, "forget": 8, "refuse": 4} and provenance["data"]["hash"].startswith("sha256:")


def test_probabilities_are_distributions_and_survive_a_save(trained: tuple[ForgetCross, dict, Path], tmp_path: Path) -> None:
    model, _, _ = trained
    intents = model.intent_probs(["please forget my knee", "I forgot my keys"])
    assert intents.shape == (2, len(INTENTS))
    np.testing.assert_allclose(intents.sum(axis=1), 1.0, rtol=1e-6)
    about = model.relevance_probs(["forget my knee"] * 2, ["my knee hurts", "I like tea"])
    assert about.shape == (2,) and ((about >= 0) & (about <= 1)).all()
    assert model.relevance_probs([], []).shape == (0,)
    again = ForgetCross.load(model.save(tmp_path / "copy"))
    np.testing.assert_allclose(again.relevance_probs(["forget my knee"], ["my knee hurts"]), about[:1], atol=1e-5)


def test_the_reader_asks_the_model_only_about_turns_with_a_memory_word(trained: tuple[ForgetCross, dict, Path]) -> None:
    reader = CrossForgetReader(trained[0])
    with pytest.raises(StopIteration) as done:
        next(reader.wants("We went to the lake on Sunday."))
    assert done.value.value == "other"
    assert isinstance(next(reader.wants("Please drop the thing about my divorce.")), Call)
    assert run(reader.wants("please forget my knee")) in INTENTS


def test_the_thresholds_decide_what_the_reader_acts_on(trained: tuple[ForgetCross, dict, Path]) -> None:
    model = ForgetCross.load(trained[2])  # a copy of its own: the thresholds are set by hand below
    memories = [record("Nora (on 10 Jan 2024): my knee hurts."), record("I like tea.")]
    model.relevance_at = 0.0
    assert set(run(CrossForgetReader(model).about("my knee", memories))) == {m.id for m in memories}
    model.relevance_at = 1.01
    assert run(CrossForgetReader(model).about("my knee", memories)) == {}
    assert run(CrossForgetReader(model).about("my knee", [])) == {}
    # a forget the model is less sure of than intent_at is no request
    model.intent_at = 1.01
    assert run(CrossForgetReader(model).wants("please forget my knee")) != "forget"


def test_a_client_on_minilm_serves_the_cross_encoder_and_any_other_the_first_heads() -> None:
    assert isinstance(packaged_reader(SentenceTransformerEmbedder()), CrossForgetReader)
    assert not isinstance(packaged_reader(HashEmbedder()), CrossForgetReader)
    assert packaged_reader(None) is None


def test_the_shipped_version_says_what_it_was_trained_and_chosen_on() -> None:
    manifest = json.loads((DEFAULT_CROSS_DIR / "manifest.json").read_text())
    model = ForgetCross.load()
    assert model.version == manifest["version"] and model.embedder == SentenceTransformerEmbedder().name
    assert 0 < model.intent_at <= 1 and 0 < model.relevance_at <= 1
    assert "held-out" in manifest["chosen_on"] and manifest["data"]["source"] and len(manifest["data"]["authors"]) >= 2
    assert {"intent", "relevance"} <= set(manifest["held_out"])


def test_a_folder_of_another_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "memsdk-pair-head/1", "intents": list(INTENTS)}))
    with pytest.raises(ValueError, match="not a forget cross-encoder"):
        ForgetCross.load(tmp_path)


def test_other_topic_negatives_come_from_unrelated_requests_of_the_same_author() -> None:
    from memsdk_training.recipes.forget_cross import other_topic_pairs

    def group(name: str, description: str, author: str, memories: list[tuple[str, bool]]) -> list[dict]:
        return [{"group": name, "request": f"forget {description}", "description": description, "memory": m, "relevant": rel, "author": author} for m, rel in memories]

    pairs = [
        *group("knee", "my knee surgery", "a", [("the surgeon said six weeks on crutches", True), ("I like tea", False)]),
        *group("knee-2", "my knee brace", "a", [("the brace itches at night", True)]),  # shares "knee": never the other's negative
        *group("debt", "my credit card debt", "a", [("I owe 9k on the Visa", True), ("my sister is a banker", False)]),
        *group("court", "my court case", "b", [("the hearing moved to March", True)]),  # another author: never drawn
    ]
    drawn = other_topic_pairs(pairs, per_request=5)
    by_request = {}
    for p in drawn:
        assert p["relevant"] is False and p["author"] == "a"
        by_request.setdefault(p["description"], set()).add(p["memory"])
    assert by_request == {
        "my knee surgery": {"I owe 9k on the Visa"},
        "my knee brace": {"I owe 9k on the Visa"},
        "my credit card debt": {"the surgeon said six weeks on crutches", "the brace itches at night"},
    }
    assert other_topic_pairs(pairs, per_request=0) == []
