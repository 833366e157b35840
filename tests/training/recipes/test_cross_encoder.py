"""The pair cross-encoder's trainer, and the mixed model it writes, with the real MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from memsdk.policies.cross_encoder import CrossEncoder, LoraSpec, MixedRelations, acting, load_relations, pair_logits
from memsdk.policies.pair_manager import PairManager
from memsdk.policies.relations import RELATIONS, PairClassifier, Relation
from memsdk.registry import PACKAGED_DIR
from memsdk_training.recipes.cross_encoder import CrossEncoderConfig, cross_floor, lora_arrays, retire_threshold, train_cross_encoder

from ...policies.conftest import memory
from .test_pair_classifier import synthetic_pairs

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

HEAD = PACKAGED_DIR / "manager" / "pairs-v5"
PAIRS = [("We just moved to Halifax", "I live in Seattle"), ("We adopted a second dog, Pixel", "I have a dog named Rocket"), ("Please forget where I live", "I live in Seattle")]


def test_a_merged_adapter_gives_the_probabilities_of_the_adapter_it_came_from() -> None:
    from memsdk.embedding import minilm_path

    torch.manual_seed(0)
    lora = LoraSpec(r=4, alpha=8, targets=("query", "value", "dense"))
    model = peft.get_peft_model(transformers.AutoModel.from_pretrained(str(minilm_path())), peft.LoraConfig(r=lora.r, lora_alpha=int(lora.alpha), target_modules=list(lora.targets)))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: an adapter that changes nothing would pass any merge
            torch.nn.init.normal_(p, std=0.05)
    classifier = torch.nn.Linear(384, len(RELATIONS))
    model.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_path()))
    new, old = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    with torch.no_grad():
        expected = torch.softmax(pair_logits(tokenizer, model, classifier, new, old, max_length=64), dim=1).double().numpy()
        bare = torch.softmax(pair_logits(tokenizer, transformers.AutoModel.from_pretrained(str(minilm_path())), classifier, new, old, max_length=64), dim=1).double().numpy()
    arrays = lora_arrays(model, classifier)
    assert sum(k.endswith(".A") for k in arrays) == sum(hasattr(m, "lora_A") for m in model.modules()) > 0
    served = CrossEncoder(arrays, lora, max_length=64).predict(new, old)
    assert np.allclose(served, expected, atol=1e-5)
    assert not np.allclose(bare, expected, atol=1e-3)  # the adapter mattered


def test_the_threshold_is_the_lowest_that_keeps_retirements_precise() -> None:
    table = {"0.5": {"precision": 0.8}, "0.6": {"precision": 0.92}, "0.7": {"precision": 0.95}}
    assert retire_threshold(table, 0.9) == 0.6
    assert retire_threshold(table, 0.99) == 0.7  # none reaches it: the strictest


def _probs(**by_relation: float) -> np.ndarray:
    row = np.zeros(len(RELATIONS))
    for name, p in by_relation.items():
        row[RELATIONS.index(Relation(name))] = p
    row[RELATIONS.index(Relation.UNRELATED)] += 1.0 - row.sum()
    return row


def test_the_floor_is_the_largest_that_changes_no_decision() -> None:
    # pair 0: the head says .04 retire, the cross-encoder .98: mixed .51 retires (act at .5).
    # A floor of .05 skips the cross-encoder there and loses that retirement; .02 does not.
    # pair 1: the head .01, the cross-encoder .6: mixed .305 acts on nothing either way.
    head = np.stack([_probs(supersedes=0.04), _probs(duplicates=0.01)])
    cross = np.stack([_probs(supersedes=0.98), _probs(duplicates=0.6)])
    act_at = (0.5, 0.5, 0.5)
    assert cross_floor(head, cross, 0.5, act_at, (0.0, 0.02, 0.05, 0.1)) == 0.02
    assert cross_floor(head, cross, 0.5, act_at, (0.05, 0.1)) == 0.0  # none holds: read every pair
    assert cross_floor(head[1:], cross[1:], 0.5, act_at, (0.0, 0.02, 0.05, 0.1)) == 0.1


class CountingCross:
    """A cross-encoder that says "supersedes" and counts the pairs it reads."""

    def __init__(self) -> None:
        self.read: list[tuple[str, str]] = []

    def predict(self, new: list[str], old: list[str]) -> np.ndarray:
        self.read += list(zip(new, old))
        return np.stack([_probs(supersedes=1.0)] * len(new))


def test_the_cross_encoder_reads_only_pairs_the_head_does_not_rule_out() -> None:
    head = PairClassifier.load(HEAD)
    new, old = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    from memsdk.embedding import SentenceTransformerEmbedder

    vectors = SentenceTransformerEmbedder().embed([*new, *old])
    u, v = vectors[: len(new)], vectors[len(new) :]
    alone = head.predict_pairs(new, old, u, v)
    acting_max = acting(alone).max(axis=1)
    floor = float(np.sort(acting_max)[1])  # the smallest pair below it, the rest at or above
    cross = CountingCross()
    mixed = MixedRelations(head=head, cross=cross, mix=0.5, cross_from=floor).predict_pairs(new, old, u, v)  # type: ignore[arg-type]
    read = acting_max >= floor
    assert cross.read == [(n, o) for n, o, r in zip(new, old, read) if r] and 0 < len(cross.read) < len(new)
    assert np.allclose(mixed[~read], alone[~read])  # the head's own probabilities where it rules the pair out
    assert np.allclose(mixed[read], 0.5 * alone[read] + 0.5 * _probs(supersedes=1.0))
    with pytest.raises(ValueError, match="cross_from"):
        MixedRelations(head=head, cross=cross, cross_from=1.5)  # type: ignore[arg-type]


def test_the_trainer_writes_a_mixed_model_that_loads_and_serves_as_a_manager(tmp_path: Path) -> None:
    cfg = CrossEncoderConfig(head=str(HEAD), epochs=2, batch_size=16, lr=2e-3, num_threads=1, progress=False, version="pairs-x0",
                             output_dir=str(tmp_path / "run"), package_dir=str(tmp_path / "manager" / "pairs-x0"))  # fmt: skip
    result = train_cross_encoder(cfg, synthetic_pairs("train", 8, seed=0), synthetic_pairs("val", 3, seed=1))
    loaded = load_relations(tmp_path / "manager" / "pairs-x0")
    assert isinstance(loaded, MixedRelations) and isinstance(loaded.head, PairClassifier)
    assert loaded.supersede_at == result.model.supersede_at and loaded.mix == 0.5 and loaded.version == "pairs-x0"
    new, old = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    assert np.allclose(loaded.cross.predict(new, old), result.model.cross.predict(new, old), atol=1e-6)
    manifest = json.loads((tmp_path / "manager" / "pairs-x0" / "manifest.json").read_text())
    assert manifest["eval_metrics"]["val_macro_f1"] == result.val["macro_f1"] and manifest["config"]["supersede_at"] == result.model.supersede_at
    assert loaded.cross_from == result.model.cross_from in cfg.cross_from_candidates
    assert {"metrics.jsonl", "curves.png", "report.json", "model"} <= {p.name for p in (tmp_path / "run").iterdir()}
    assert (tmp_path / "manager" / "pairs-x0" / "cross.npz").stat().st_size < 4 * 2**20  # an adapter, not a copy of MiniLM
    # served: the manager takes the mix's threshold, and its decisions are ADDs (never a delete)
    manager = PairManager.load(tmp_path / "manager" / "pairs-x0")
    assert manager.thresholds.supersede_at == loaded.supersede_at
    decision = manager.decide(["We just moved to Halifax"], [memory("I live in Seattle"), memory("I have a dog named Rocket")])
    assert [str(op.op) for op in decision.ops] == ["ADD"]


def test_a_folder_of_another_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {"format": "something-else"}}))
    with pytest.raises(ValueError, match="neither a pair head"):
        load_relations(tmp_path)
    assert isinstance(load_relations(HEAD), PairClassifier)


def test_written_train_pairs_are_repeated_and_val_pairs_are_not(tmp_path: Path) -> None:
    from memsdk.embedding import HashEmbedder
    from memsdk_training.recipes.cross_encoder import recipe_pairs

    rows = [{"old": "I live in Oslo", "new": "We moved to Bergen", "label": "supersedes", "attribute": f"home city {i}", "author": "x"} for i in range(2)]
    written = tmp_path / "written.jsonl"
    written.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = {"train_scenarios": 2, "val_scenarios": 2, "chat_negatives": None, "written_pairs": (str(written),), "written_repeat": 3}
    everything_trains = CrossEncoderConfig(**base, written_split=(1.0, 0.0))
    bench = len(recipe_pairs(everything_trains.model_copy(update={"written_pairs": ()}), "train", HashEmbedder(16)))
    assert len(recipe_pairs(everything_trains, "train", HashEmbedder(16))) == bench + 2 * 3
    everything_validates = CrossEncoderConfig(**base, written_split=(0.0, 1.0))
    assert sum(p.new.endswith("We moved to Bergen") for p in recipe_pairs(everything_validates, "val", HashEmbedder(16))) == 2
