"""Pairs written outside the generator: read with a speaker header, split by attribute so
the test part holds attributes training never saw, and trained on beside other pairs."""

from __future__ import annotations

import json
from pathlib import Path

from memsdk.policies.relations import ATTRIBUTES, Relation
from memsdk_training.recipes.pair_classifier import PairClassifierConfig, train_pair_classifier
from memsdk_training.recipes.written_pairs import DATA_DIR, read_written, split_by_attribute

from .test_pair_classifier import QUICK, synthetic_pairs

ROWS = [
    {"old": f"My {a} is {v}", "new": f"Got a new {a}: {w}", "label": "supersedes", "attribute": f"  {a.upper()} ", "holder": "self", "kind": "event-told", "author": "T"}
    for a in ("bike", "bank", "gym", "phone plan", "dentist", "barber", "car", "router", "landlord", "school")
    for v, w in (("red", "blue"), ("old", "new"))
]


def write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "pairs-t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_each_pair_reads_as_one_speakers_two_statements(tmp_path: Path) -> None:
    (first, *_) = read_written([write(tmp_path, ROWS)])
    speaker = first.new.split(":")[0]
    assert first.old == f"{speaker}: My bike is red" and first.new == f"{speaker}: Got a new bike: blue"
    assert first.label is Relation.SUPERSEDES and first.attribute == "bike" and first.author == "T"


def test_an_attribute_lands_in_one_part_the_same_way_every_time(tmp_path: Path) -> None:
    pairs = read_written([write(tmp_path, ROWS)])
    parts = split_by_attribute(pairs, 0.5, 0.25)
    assert sum(map(len, parts)) == len(pairs) and parts == split_by_attribute(pairs, 0.5, 0.25)
    owners = [{p.attribute for p in part} for part in parts]
    assert not (owners[0] & owners[1] or owners[0] & owners[2] or owners[1] & owners[2])
    assert split_by_attribute(pairs, 1.0, 0.0)[0] == pairs


def test_the_shipped_corpora_have_many_attributes_and_authors() -> None:
    written = read_written(sorted(DATA_DIR.glob("pairs-*.jsonl")))
    assert len({w.author for w in written}) >= 3 and len({w.attribute for w in written}) >= 300
    assert {w.label for w in written} == {Relation.SUPERSEDES, Relation.CORRECTS, Relation.DUPLICATES, Relation.COMPATIBLE, Relation.UNRELATED}


def test_the_recipe_trains_on_written_pairs_and_scores_the_held_out_attributes(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS)
    cfg = PairClassifierConfig(**QUICK, epochs=3, hidden=(8,), output_dir=str(tmp_path / "run"), written_pairs=(str(path),), written_split=(0.5, 0.2), written_prototypes=True)
    result = train_pair_classifier(cfg, synthetic_pairs("train", 4, 0), synthetic_pairs("val", 2, 1))
    report = json.loads((result.out / "report.json").read_text())
    _, _, test = split_by_attribute(read_written([path]), 0.5, 0.2)
    assert report["attribute_held_out_pairs"] == len(test) > 0
    assert set(report["attribute_held_out_retire"]) == {"0.5", "0.6", "0.7", "0.8", "0.9"}
    # the train attributes joined the prototypes the head stores and serves with
    train_attributes = {p.attribute for p in split_by_attribute(read_written([path]), 0.5, 0.2)[0]}
    assert result.classifier.prototypes is not None and len(result.classifier.prototypes) == len(ATTRIBUTES) + len(train_attributes)


def test_a_chat_pair_names_no_attribute_and_splits_by_its_earlier_turn(tmp_path: Path) -> None:
    chat = [{"old": "I won't give up!", "new": f"Still not quitting, {n}!", "label": "duplicates", "kind": "restated-plan", "author": "F"} for n in ("Jo", "Mel")]
    pairs = read_written([write(tmp_path, chat)])
    assert {p.attribute for p in pairs} == {None} and {p.split_key for p in pairs} == {"turn: I won't give up!"}
    assert sum(bool(part) for part in split_by_attribute(pairs, 0.5, 0.25)) == 1  # one earlier turn, one part
