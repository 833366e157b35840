"""The pair classifier recipe learns relations from labelled pairs; shuffled labels teach nothing.

Synthetic pairs over four slots, embedded with the hashing embedder (no model load): train
and val share the phrasings but no values (cities, jobs, names, hobbies), so the head must
learn the relation from the frame, not memorise the values.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from memsdk.embedding import HashEmbedder
from memsdk.policies.pair_manager import PairManager
from memsdk.policies.relations import RELATIONS, PairClassifier, Relation
from memsdk_training.recipes.pair_classifier import Pair, PairClassifierConfig, embed_pairs, main, retire_threshold, train_pair_classifier

from ...policies.conftest import memory

#: slot -> (state, change, also, forget request), each phrasing with {v}
SLOTS = {
    "home": ("I live in {v}", "We just moved to {v}", "I also rent a cabin near {v}", "Please forget where I live"),
    "job": ("I work as a {v}", "I got a new job as a {v}", "On weekends I also help out as a {v}", "Don't store anything about my job"),
    "pet": ("I have a dog named {v}", "Sadly the dog died, we got a cat called {v}", "We adopted a second dog, {v}", "Please delete what you know about my pets"),
    "hobby": ("My hobby is {v}", "I gave up my old hobby, now I do {v}", "I picked up {v} too", "Forget my hobbies, please"),
}
VALUES = {
    "home": ["Austin", "Boston", "Denver", "Lisbon", "Dublin", "Glasgow", "Seattle", "Halifax", "Bergen", "Ghent", "Hobart", "Krakow"],
    "job": ["nurse", "chef", "teller", "designer", "editor", "architect", "developer", "curator", "baker", "pilot", "plumber", "florist"],
    "pet": ["Buddy", "Scout", "Mochi", "Biscuit", "Pepper", "Luna", "Ziggy", "Olive", "Rocket", "Nala", "Pixel", "Maple"],
    "hobby": ["chess", "pottery", "sailing", "archery", "fencing", "tennis", "knitting", "origami", "kayaking", "climbing", "painting", "surfing"],
}


def synthetic_pairs(split: str, n_per_class: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    values = {s: v[:8] if split == "train" else v[8:] for s, v in VALUES.items()}  # no value in both splits
    out = []
    for _ in range(n_per_class):
        slot, other = rng.sample(sorted(SLOTS), 2)
        state, change, also, forget = SLOTS[slot]
        a, b = rng.sample(values[slot], 2)
        old = state.format(v=a)
        out += [
            Pair(change.format(v=b), old, Relation.SUPERSEDES),
            Pair(f"Actually {state.format(v=b)[0].lower()}{state.format(v=b)[1:]}, not {a}", old, Relation.CORRECTS),
            Pair(rng.choice([old, f"As I said, {old[0].lower()}{old[1:]}", f"{old}, yes"]), old, Relation.DUPLICATES),
            Pair(also.format(v=b), old, Relation.COMPATIBLE),
            Pair(forget, old, Relation.FORGET_TARGET),
            Pair(rng.choice(SLOTS[other][:3]).format(v=rng.choice(values[other])), old, Relation.UNRELATED),
        ]
    return out


#: small synthetic sets learn faster than the benchmark's defaults allow for
QUICK = {"embedder": "hash", "lr": 2e-3, "dropout": 0.1, "weight_decay": 1e-4, "embedding_weight": 1.0, "progress": False, "num_threads": 1, "chat_negatives": None}


def fit(tmp_path: Path, *, shuffle: bool) -> float:
    cfg = PairClassifierConfig(**QUICK, epochs=30, hidden=(32,), shuffle_labels=shuffle, output_dir=str(tmp_path / ("control" if shuffle else "run")))
    result = train_pair_classifier(cfg, synthetic_pairs("train", 60, seed=0), synthetic_pairs("val", 20, seed=1), embedder=HashEmbedder(64))
    accuracy: float = result.val["accuracy"]
    return accuracy


def test_the_head_learns_relations_of_unseen_values_and_shuffled_labels_stay_near_chance(tmp_path: Path) -> None:
    learned, control = fit(tmp_path, shuffle=False), fit(tmp_path, shuffle=True)
    print(f"\nval accuracy {learned:.3f}; shuffled train labels {control:.3f}; chance {1 / len(RELATIONS):.3f}")
    assert learned >= 0.8
    assert control <= 0.4 and learned - control >= 0.4


def test_the_written_head_is_the_trained_one_and_serves_as_a_manager(tmp_path: Path) -> None:
    cfg = PairClassifierConfig(**QUICK, epochs=20, output_dir=str(tmp_path / "run"), package_dir=str(tmp_path / "manager" / "pairs-v1"))
    val = synthetic_pairs("val", 10, seed=1)
    result = train_pair_classifier(cfg, synthetic_pairs("train", 40, seed=0), val, embedder=HashEmbedder(64))
    loaded = PairClassifier.load(tmp_path / "manager" / "pairs-v1")
    x = embed_pairs(val, HashEmbedder(64))
    assert np.array_equal(loaded.predict(x), result.classifier.predict(x))
    # served at the lowest threshold whose val retirements were at least min_precision right
    assert cfg.min_precision is not None and loaded.supersede_at == retire_threshold(result.val_retire, cfg.min_precision) and PairManager(loaded, HashEmbedder(64)).thresholds.supersede_at == loaded.supersede_at
    manifest = json.loads((tmp_path / "manager" / "pairs-v1" / "manifest.json").read_text())
    assert manifest["eval_metrics"]["val_accuracy"] == result.val["accuracy"] and manifest["config"]["training"]["val_confusion"]["matrix"] == result.val["confusion"]
    assert {"metrics.jsonl", "curves.png", "report.json", "head"} <= {p.name for p in (tmp_path / "run").iterdir()}
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 20
    # served: the trained head retires the home it was told was replaced, and keeps a second dog beside the first
    pm = PairManager(loaded, HashEmbedder(64))
    home, dog = memory("I live in Seattle"), memory("I have a dog named Rocket")
    [moved] = pm.decide(["We just moved to Halifax"], [home, dog]).ops
    [second] = pm.decide(["We adopted a second dog, Pixel"], [home, dog]).ops
    assert moved.supersedes == (home.record.id,) and second.supersedes == ()


def test_the_command_line_trains_from_jsonl_files(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    for split, n, seed in (("train", 10, 0), ("val", 4, 1)):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"new": p.new, "old": p.old, "label": str(p.label)}) + "\n" for p in synthetic_pairs(split, n, seed)))
    (tmp_path / "cfg.yaml").write_text("hidden: [16]\nnum_threads: 1\n")
    args = ["--config", str(tmp_path / "cfg.yaml"), "--train", str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"), "--embedder", "hash"]
    assert main([*args, "--epochs", "3", "--output-dir", str(tmp_path / "out"), "--package", str(tmp_path / "pkg"), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output_dir"] == str(tmp_path / "out") and set(printed["per_class"]) == {str(r) for r in RELATIONS}
    assert PairClassifier.load(tmp_path / "pkg").layers[0][0].shape[1] == 16


def test_memsdk_training_train_pairs_runs_the_classifier_from_its_config(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memsdk_training.cli import main as training_main

    for split, n, seed in (("train", 10, 0), ("val", 4, 1)):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"new": p.new, "old": p.old, "label": str(p.label)}) + "\n" for p in synthetic_pairs(split, n, seed)))
    config = {"train_path": str(tmp_path / "train.jsonl"), "val_path": str(tmp_path / "val.jsonl"), "embedder": "hash", "hidden": [8], "epochs": 2, "num_threads": 1, "progress": False}
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    assert training_main(["train", "pairs", "--config", str(tmp_path / "cfg.json"), "--output-dir", str(tmp_path / "out")]) == 0
    assert json.loads(capsys.readouterr().out)["output_dir"] == str(tmp_path / "out")
    assert PairClassifier.load(tmp_path / "out" / "head").layers[0][0].shape[1] == 8
