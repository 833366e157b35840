"""The pooled manager gate's sources: the retirement rule by hand, and a real manager's rewards."""

from __future__ import annotations

import numpy as np

from memsdk.policies.pair_manager import PairManager, PairThresholds
from memsdk.policies.relations import RELATIONS, PairClassifier, Relation
from memsdk.registry import PACKAGED_DIR
from memsdk_training.recipes.manager_gate import retirements, written_side
from memsdk_training.recipes.written_pairs import WrittenPair


def _row(**by_relation: float) -> np.ndarray:
    row = np.zeros(len(RELATIONS))
    for name, p in by_relation.items():
        row[RELATIONS.index(Relation(name))] = p
    return row


def test_a_pair_retires_only_past_the_threshold_and_never_as_a_duplicate_or_a_forget_request() -> None:
    manager = PairManager(PairClassifier.load(PACKAGED_DIR / "manager" / "pairs-v5"), thresholds=PairThresholds(supersede_at=0.6))
    probs = np.stack([
        _row(supersedes=0.4, corrects=0.3),         # .7 >= .6: retires
        _row(supersedes=0.5),                       # .5 < .6
        _row(supersedes=0.35, duplicates=0.65),     # a duplicate: the manager adds nothing
        _row(corrects=0.4, forget_target=0.55),     # a forget request is not a fact
    ])  # fmt: skip
    assert retirements(probs, manager).tolist() == [True, False, False, False]


def test_the_written_source_scores_each_pair_right_or_wrong() -> None:
    manager = PairManager.load(PACKAGED_DIR / "manager" / "pairs-v5")
    pairs = [
        WrittenPair("Alex: We moved to Halifax last spring", "Alex: I live in Seattle", Relation.SUPERSEDES, "home city", "a", "statement"),
        WrittenPair("Alex: My sister lives in Lyon", "Alex: I live in Seattle", Relation.COMPATIBLE, "home city", "a", "statement"),
    ]
    side = written_side(manager, pairs)
    assert side.version == "pairs-v5" and len(side.rewards) == 2 and set(side.rewards) <= {0.0, 1.0}
