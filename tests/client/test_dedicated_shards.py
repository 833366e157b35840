"""The answer path works the same whether a speaker's tiers share the embedded store's shard
or have shards of their own (`EdgeTransport.dedicate`, what a speaker of 10k turns gets): the
demo conversation, heuristic policies, both layouts.

Compared by what is found, not by order: the bank contract suite compares rankings on text
built to have no ties, but here ties are common (two turns, each first in one half of a
hybrid search and third in the other, fuse to the same score), the engine orders a tie by its
point order, which a copy into another shard changes, and the answer path builds on that
order (the turns around its best hits). So: the same memories kept, the forget applied in
both, and each question's evidence retrieved in both."""

from __future__ import annotations

from pathlib import Path

from memsdk import MemoryClient
from memsdk.bank import MemoryBank
from memsdk.datasets.locomo import load_locomo
from memsdk.scoring import evidence_recall
from memsdk.store.edge import EdgeTransport
from memsdk.types import Turn
from tests.store.conftest import Jittered

DEMO = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo_conversation.json"


def test_the_answer_path_over_dedicated_shards_finds_what_it_finds_over_one(tmp_path: Path) -> None:
    conv = load_locomo(str(DEMO))[0]
    speakers = [{"user_id": s.lower(), "run_id": conv.sample_id} for s in conv.speakers]

    def scope_of(turn: Turn) -> dict[str, str]:
        return {"user_id": turn.speaker.lower(), "run_id": conv.sample_id}

    seen = []
    for name, dedicate_after in (("shared", None), ("dedicated", 4)):
        bank = MemoryBank(EdgeTransport(tmp_path / name / "store", dim=64, dedicate_after=dedicate_after), Jittered(64))
        with MemoryClient(data_dir=tmp_path / name / "data", bank=bank, policies="heuristic", answer_k=10) as client:
            client.ingest(conv.turns(), scope=scope_of)
            moved = {key.rsplit("/", 1)[1] for key in bank.transport.dedicated()}  # type: ignore[attr-defined]
            assert moved == (set() if dedicate_after is None else {"episodic", "semantic"})
            recall = [evidence_recall([m.record.source_turn_ids for m in client.retrieve(qa.question, scope=speakers)], qa.evidence, 10) for qa in conv.questions()]
            records = sorted((r.text, r.tier.value, r.deleted) for s in speakers for r in client.list(scope=s, include_deleted=True))
            phone = [h.record.text for h in client.search("phone number 07700 900123", scope=speakers[0], limit=5, hybrid=True)]
            seen.append((recall, records, phone))
        bank.close()
    (shared_recall, shared_records, shared_phone), (own_recall, own_records, own_phone) = seen
    assert own_records == shared_records
    assert any(deleted for *_, deleted in own_records)  # the forget and the corrections retired some
    assert not any("900123" in text for text in own_phone + shared_phone)  # the forgotten number is found in neither
    assert own_recall == shared_recall and sum(r or 0 for r in own_recall) >= len(own_recall) / 2
