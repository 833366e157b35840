"""`with_neighbours`: the answer's last third is the turns said around its best turns, in
conversation order, each memory once, across the scopes searched and no other."""

from __future__ import annotations

from collections.abc import Sequence

from memsdk.types import Actor
from memsdk.bank import MemoryBank
from memsdk.effects import Runner
from memsdk.pipeline.ingest import episode_ops
from memsdk.pipeline.retrieval import NEIGHBOUR_SHARE, with_neighbours
from memsdk.embedding import HashEmbedder
from memsdk.types import Op, Scope, ScoredMemory, Tier, Turn

ANN, BEN, EVE = Scope(user_id="ann", run_id="c1"), Scope(user_id="ben", run_id="c1"), Scope(user_id="eve")


def conversation(bank: MemoryBank, texts: Sequence[str]) -> list[ScoredMemory]:
    """Ann and Ben take turns, one ingest each, as the ingest loop writes them."""
    turns = [Turn(speaker="ann" if i % 2 == 0 else "ben", text=t, turn_id=f"D1:{i}") for i, t in enumerate(texts)]
    stored = []
    for i, turn in enumerate(turns):
        (op,) = episode_ops([turn], turns[i - 1 : i])
        stored.append(bank.apply(ANN if i % 2 == 0 else BEN, [op]).changes[0].after)
    return [ScoredMemory(record=r, score=1.0 - i / 100) for i, r in enumerate(stored)]


def texts(hits: Sequence[ScoredMemory]) -> list[str]:
    return [h.record.text for h in hits]


def test_the_last_third_holds_the_next_and_previous_turns_two_each_way() -> None:
    bank = MemoryBank.open(":memory:", embedder=HashEmbedder())
    said = conversation(bank, [f"turn {i}" for i in range(9)])
    fact, tail1, tail2 = (ScoredMemory(record=bank.apply(ANN, [Op.add(t)]).changes[0].after, score=0.5) for t in ("ann has a dog", "fact x", "fact y"))
    # ranked: turn 4, a fact (no neighbours: not a turn), turns 0 and 8, then two more facts
    ranked = [said[4], fact, said[0], said[8], tail1, tail2]
    assert NEIGHBOUR_SHARE == 1 / 3
    shown = Runner(bank).run(with_neighbours(ranked, [ANN, BEN], 6))  # 4 kept by rank, 2 neighbours
    assert texts(shown) == ["turn 4", "ann has a dog", "turn 0", "turn 8", "turn 5", "turn 3"]
    assert [h.score for h in shown[4:]] == [said[4].score] * 2  # the score of the hit they sit by
    every = Runner(bank).run(with_neighbours(ranked, [ANN, BEN], 12))  # 8 kept: all six ranked
    near_4, near_0, near_8 = ["turn 5", "turn 3", "turn 6", "turn 2"], ["turn 1"], ["turn 7"]  # turn 2, 6 once
    assert texts(every) == [*texts(ranked), *near_4, *near_0, *near_8]
    roomy = Runner(bank).run(with_neighbours(ranked, [ANN, BEN], 15))  # 10 kept, so all of it, once each
    assert texts(roomy) == texts(every)


def test_neighbours_come_only_from_the_scopes_searched_and_stop_at_a_forgotten_turn() -> None:
    bank = MemoryBank.open(":memory:", embedder=HashEmbedder())
    said = conversation(bank, ["we got a puppy", "what is its name?", "Buddy", "cute!"])
    bank.apply(EVE, episode_ops([Turn(speaker="eve", text="hi")], [Turn(speaker="ann", text="Buddy")]))
    only_ann = Runner(bank).run(with_neighbours([said[2]], [ANN], 3))
    assert texts(only_ann) == ["Buddy"]  # its neighbours are Ben's, and eve's "hi" is not searched
    bank.apply(BEN, [Op.delete(said[3].record.id)], actor=Actor(role="forget"))
    both = Runner(bank).run(with_neighbours([said[2]], [ANN, BEN], 3))
    assert texts(both) == ["Buddy", "what is its name?", "we got a puppy"]
    assert all(h.record.tier is Tier.EPISODIC for h in both)


def test_a_neighbour_shown_already_as_the_superseded_fact_that_copies_it_is_not_shown_again() -> None:
    bank = MemoryBank.open(":memory:", embedder=HashEmbedder())
    said = conversation(bank, ["I live in Leeds", "nice", "we moved to York"])
    copy = bank.apply(ANN, [Op.add("Ann (on 3 March 2025): I live in Leeds", source_turn_ids=said[0].record.source_turn_ids)]).changes[0].after
    shown_copy = ScoredMemory(record=copy.model_copy(update={"invalid_at": copy.created_at}), score=0.9)  # fuse shows a superseded copy, not its turn
    shown = Runner(bank).run(with_neighbours([said[2], shown_copy], [ANN, BEN], 6))  # room for both turns before York
    assert texts(shown) == ["we moved to York", "Ann (on 3 March 2025): I live in Leeds", "nice"]  # "I live in Leeds" once, as the fact
