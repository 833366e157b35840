"""The pair features and the pair head's folder (`memsdk.policies.relations`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memsdk.embedding import HashEmbedder
from memsdk.policies.relations import (
    ATTRIBUTES, LEXICAL, RELATIONS, PairClassifier, Relation, attribute_prototypes, feature_dim, lexical_features, pair_features, relation_text,
    speaker_of, subject_of, values_of,
)  # fmt: skip

#: two attributes along the first two axes of a 4-d space
PROTOTYPES = np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32)


def lex(new: str, old: str, cosine: float = 0.0) -> dict[str, float]:
    return dict(zip(LEXICAL, lexical_features(new, old, cosine)))


def random_head(
    seed: int = 0, embed_dim: int = 4, hidden: int = 8, labels: tuple[Relation, ...] = RELATIONS, embedder: str = "hash-4", lexical: tuple[str, ...] = LEXICAL
) -> PairClassifier:
    rng = np.random.default_rng(seed)
    d = feature_dim(embed_dim, lexical)
    layers = ((rng.normal(size=(d, hidden)).astype(np.float32), rng.normal(size=hidden).astype(np.float32)),
              (rng.normal(size=(hidden, len(labels))).astype(np.float32), rng.normal(size=len(labels)).astype(np.float32)))  # fmt: skip
    prototypes = PROTOTYPES if "same_attribute" in lexical else None
    return PairClassifier(
        layers, rng.normal(size=d).astype(np.float32), rng.uniform(0.5, 2, size=d).astype(np.float32), labels, embedder,
        metrics={"val_accuracy": 0.5}, lexical=lexical, prototypes=prototypes, supersede_at=0.6 if prototypes is not None else None,
    )  # fmt: skip


def test_the_embedding_blocks_are_the_product_and_the_absolute_difference_and_the_cosine_their_dot() -> None:
    u = np.array([[1, 0, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    v = np.array([[0, 1, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    x = pair_features(u, v, ["a cat", "a dog"], ["a cow", "a dog"], prototypes=PROTOTYPES)
    assert x.shape == (2, feature_dim(4)) == (2, 8 + len(LEXICAL)) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :8], [0, 0, 0, 0, 1, 1, 0, 0])
    np.testing.assert_allclose(x[1, :8], [0.36, 0.64, 0, 0, 0, 0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(x[:, 8 + LEXICAL.index("cosine")], [0.0, 1.0], atol=1e-6)
    with pytest.raises(ValueError):
        pair_features(u, v[:1], ["a"], ["b"])
    with pytest.raises(ValueError, match="prototypes"):
        pair_features(u, v, ["a cat", "a dog"], ["a cow", "a dog"])  # the attribute features without prototypes
    with pytest.raises(ValueError, match="unknown"):
        pair_features(u, v, ["a cat", "a dog"], ["a cow", "a dog"], lexical=("cosine", "mystery"))


def test_the_attribute_features_by_hand() -> None:
    """Row 0: u on the first attribute, v on the second; row 1: both at (.6, .8). By hand:
    a(.6, .8) = softmax(12, 16) = (e^-4, 1) / (1 + e^-4) = (.01799, .98201), so
    same_attribute = .01799^2 + .98201^2 = .96467 and shared_attribute = max(.6, .8) = .8;
    row 0: a(u) = (1, e^-20) and a(v) = (e^-20, 1) over (1 + e^-20), same ~ 2e-9, shared 0."""
    u = np.array([[1, 0, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    v = np.array([[0, 1, 0, 0], [0.6, 0.8, 0, 0]], dtype=np.float32)
    x = pair_features(u, v, ["a", "b"], ["c", "d"], lexical=("same_attribute", "shared_attribute", "cosine"), prototypes=PROTOTYPES)
    assert x.shape == (2, 8 + 3)
    np.testing.assert_allclose(x[:, 8], [0.0, 0.96467], atol=1e-4)
    np.testing.assert_allclose(x[:, 9], [0.0, 0.8], atol=1e-6)
    np.testing.assert_allclose(x[:, 10], [0.0, 1.0], atol=1e-6)  # in the order asked for


def test_the_attribute_prototypes_are_unit_means_of_their_descriptions() -> None:
    embedder = HashEmbedder(32)
    p = attribute_prototypes(embedder.embed)
    assert p.shape == (len(ATTRIBUTES), 32)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    first = embedder.embed(list(next(iter(ATTRIBUTES.values())))).mean(axis=0)
    np.testing.assert_allclose(p[0], first / np.linalg.norm(first), atol=1e-6)


def test_lexical_features_see_overlap_speaker_subject_values_and_the_cues_of_each_change() -> None:
    same = lex("Sam (on 8 May 2023): I live in Boston", "Sam (on 1 May 2023): I live in Boston now")
    assert same["overlap_new"] == 1.0 and same["overlap_old"] == pytest.approx(2 / 3) and same["same_speaker"] == 1.0 and same["same_subject"] == 1.0
    assert lex("Ann: I live in Rome", "Sam: I live in Rome")["same_speaker"] == 0.0
    assert lex("I live in Rome", "I live in Rome")["same_speaker"] == 0.0  # no header: not known to be the same
    assert lex("My brother moved to Lyon", "I live in Paris")["same_subject"] == 0.0
    assert lex("My brother moved to Lyon", "My brother lives in Paris")["same_subject"] == 1.0
    assert lex("The wedding is on the 10th", "The wedding is on the 3rd")["numbers_differ"] == 1.0
    assert lex("The wedding is on the 10th", "The wedding is in June")["numbers_differ"] == 0.0
    assert lex("It's the 10th, not the 3rd", "x")["correction_cue"] == 1.0 and lex("Sorry, I got that wrong", "x")["correction_cue"] == 1.0
    assert lex("I don't eat meat anymore", "x")["change_cue"] == 1.0 and lex("We finally moved to Lyon", "x")["change_cue"] == 1.0
    assert lex("I adopted a second dog", "x")["addition_cue"] == 1.0 and lex("I adopted a second dog", "x")["correction_cue"] == 0.0
    moved = lex("Ana: My flatmate Noor just moved to Bristol", "Ana: My flatmate Noor has been living in Porto")
    assert moved["values_shared"] == pytest.approx(1 / 3) and moved["new_value"] == 1.0  # noor, bristol / noor, porto
    again = lex("Just to repeat, my email is ana.b@example.net", "Send the photos to ana.b@example.net")
    assert again["values_shared"] == 1.0 and again["new_value"] == 0.0
    assert lex("Could you not keep my phone number anywhere", "x")["forget_cue"] == 1.0
    assert lex("Please forget my old address", "x")["forget_cue"] == 1.0 and lex("I moved to a new address", "x")["forget_cue"] == 0.0
    assert lex("red blue green pink gray teal", "Sam: cyan")["length_ratio"] == pytest.approx(np.log(7 / 2))


def test_the_header_is_not_embedded_but_names_the_speaker() -> None:
    assert relation_text("Caroline (on 8 May, 2023): We moved to Lyon") == "We moved to Lyon"
    assert relation_text("We moved to Lyon") == "We moved to Lyon"
    assert speaker_of("Caroline (on 8 May, 2023): We moved to Lyon") == "caroline" and speaker_of("We moved to Lyon") is None
    assert subject_of("Caroline (on 8 May, 2023): my sister's dog") == "sister" and subject_of("Ines moved to Lyon") is None
    assert values_of("Caroline (on 8 May, 2023): Correction: I moved to Lyon in 2022. Then Bob came") == {"lyon", "2022", "bob"}  # no header, no sentence start


def test_a_saved_head_loads_with_identical_probabilities_in_relation_order(tmp_path: Path) -> None:
    shuffled = (Relation.UNRELATED, Relation.DUPLICATES, Relation.SUPERSEDES, Relation.FORGET_TARGET, Relation.CORRECTS, Relation.COMPATIBLE)
    head = random_head(labels=shuffled)
    x = np.random.default_rng(1).normal(size=(5, head.input_dim)).astype(np.float32)
    head.save(tmp_path / "pairs-v1", config={"epochs": 3})
    loaded = PairClassifier.load(tmp_path / "pairs-v1")
    probs = loaded.predict(x)
    assert np.array_equal(probs, head.predict(x)) and probs.shape == (5, len(RELATIONS))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    logits = np.maximum((x - head.mean) / head.scale @ head.layers[0][0] + head.layers[0][1], 0) @ head.layers[1][0] + head.layers[1][1]
    assert (probs.argmax(axis=1) == [RELATIONS.index(shuffled[i]) for i in logits.argmax(axis=1)]).all()  # columns follow RELATIONS, not the head's order
    assert (loaded.version, loaded.embedder, dict(loaded.metrics), loaded.supersede_at) == ("pairs-v1", "hash-4", {"val_accuracy": 0.5}, 0.6)
    assert loaded.lexical == LEXICAL and loaded.prototypes is not None and np.array_equal(loaded.prototypes, PROTOTYPES)


def test_a_head_trained_on_fewer_features_loads_and_reads_only_those(tmp_path: Path) -> None:
    """pairs-v4 was trained before the attribute features: its manifest names 13, it has no
    prototypes, and it is served on exactly what it was trained on."""
    older = LEXICAL[: LEXICAL.index("same_attribute")]
    random_head(lexical=older).save(tmp_path / "pairs-old")
    loaded = PairClassifier.load(tmp_path / "pairs-old")
    assert loaded.lexical == older and loaded.prototypes is None and loaded.supersede_at is None
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    new, old = ["We moved to Lyon", "a", "b"], ["I live in Paris", "c", "d"]
    expected = loaded.predict(pair_features(u, v, new, old, lexical=older))
    assert np.array_equal(loaded.predict_pairs(new, old, u, v), expected)
    with pytest.raises(ValueError, match="reads"):
        loaded.predict(pair_features(u, v, new, old, prototypes=PROTOTYPES))  # every feature: wider than it reads


def test_a_saved_head_is_a_registry_manager_version_and_refuses_other_features(tmp_path: Path) -> None:
    from memsdk.registry import PolicyManifest, PolicyRegistry

    random_head().save(tmp_path / "manager" / "pairs-v1")
    manifest = PolicyRegistry(tmp_path).get("manager", "pairs-v1")
    assert isinstance(manifest, PolicyManifest) and manifest.base_model == "hash-4" and manifest.config["labels"] == [str(r) for r in RELATIONS]
    path = tmp_path / "manager" / "pairs-v1" / "manifest.json"
    data = json.loads(path.read_text())
    for lexical in (["cosine"], [*LEXICAL[:-1], "mystery"]):  # fewer names than its width; a feature this module does not compute
        data["config"]["features"]["lexical"] = lexical
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match="features"):
            PairClassifier.load(path.parent)
    with pytest.raises(ValueError, match="no readable manifest"):
        PairClassifier.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"role": "answerer", "version": "locomo-v1", "config": {"lora": {}}}))
    with pytest.raises(ValueError, match="not a pair head"):
        PairClassifier.load(tmp_path)  # a LoRA adapter's manifest
