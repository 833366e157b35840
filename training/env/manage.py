"""Manager states from the management benchmark, judged by its gold state, and the gold teacher.

One state per turn of an episode that states a value (`memsdk.eval.manage.scenarios`): the
speaker's semantic bank as the gold left it just before the turn (every earlier turn's
heuristic facts, each superseded where the gold says a later turn replaced it), the turn's
heuristic facts (what the runtime's default extractor hands the manager), and the gold
state after it as `Expectation`s over source turns:

    this turn                a restatement adds nothing (absent); else its fact is current
    a turn it supersedes     retired: kept as history, not current   ("supersedes", "corrects")
    or corrects
    a turn it sits beside    still current                           ("compatible", "duplicates")

Forget requests are left out: the client's rules act on them before any manager, and a
manager is never asked to delete. `gold_ops` is what a perfect manager writes for a state,
over the memories it is shown: the warm start's teacher.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

from memsdk.bank import BankLimits, MemoryBank
from memsdk.embedding import Embedder
from memsdk.eval.manage.scenarios.demo import scenarios
from memsdk.eval.manage.scenarios.models import Scenario, ScenarioSplit
from memsdk.eval.manage.scenarios.training_pairs import relations
from memsdk.policies import HeuristicExtractor
from memsdk.store.memory import InMemoryTransport
from memsdk.types import Actor, Op, ScoredMemory

from ..rewards.validity import Expectation
from .state import MemoryState

__all__ = ["manage_states", "gold_ops"]

BUILDER = Actor(role="manage-gold")
#: what the old turn's fact must be after the new turn, by the gold's label
_OLD = {"supersedes": "retired", "corrects": "retired", "compatible": "current", "duplicates": "current"}


def manage_states(embedder: Embedder, split: ScenarioSplit, n: int | None = None, *, seed: int = 0, limits: BankLimits = BankLimits()) -> Iterator[MemoryState]:
    """The states of ``n`` scenarios of ``split`` (its default size when None), in order."""
    for sc in scenarios(split, n, seed=seed):
        yield from _scenario_states(sc, embedder, limits)


def _scenario_states(sc: Scenario, embedder: Embedder, limits: BankLimits) -> Iterator[MemoryState]:
    extractor = HeuristicExtractor()
    acts = relations(sc)
    in_episode = {t: ep for ep in sc.episodes for t in ep.turn_ids}
    banks = {speaker: MemoryBank(InMemoryTransport(embedder.dim), embedder, limits=limits) for speaker in sc.speakers}
    for turn in sc.turns:
        scope, bank = sc.scope(turn.speaker), banks[turn.speaker]
        facts = tuple(extractor.extract(turn.turn()).facts)
        mine = [(old, label) for new, old, label, _ in acts if new == turn.turn_id]
        if not facts or any(label == "forget_target" for _, label in mine):
            continue
        restated = any(label == "duplicates" for _, label in mine)
        if turn.turn_id in in_episode and in_episode[turn.turn_id].event != "forget":
            expect = [Expectation((turn.turn_id,), "absent" if restated else "current")]
            expect += [Expectation((old,), _OLD[label]) for old, label in mine if label in _OLD]  # type: ignore[arg-type]
            yield MemoryState(key=f"{sc.id}/{turn.turn_id}", bank=bank.snapshot(scope), facts=facts, qa=(), turn=turn.turn(), expect=tuple(expect))
        if not restated:
            replaced = {old for old, label in mine if _OLD.get(label) == "retired"}
            supersedes = tuple(r.id for r in bank.list(scope) if r.current and replaced & set(r.source_turn_ids))
            bank.apply(scope, _adds(facts, (turn.turn_id,), supersedes), actor=BUILDER)


def gold_ops(state: MemoryState, related: Sequence[ScoredMemory]) -> list[Op] | None:
    """The ops that make every expectation of ``state`` hold, naming only memories in
    ``related`` (what the manager is shown); None when one it must retire is not shown."""
    if any(e.status == "absent" for e in state.expect):
        return []  # NOOP: the fact is already stored
    retire = {t for e in state.expect if e.status == "retired" for t in e.turn_ids}
    shown = tuple(m.record.id for m in related if m.record.current and retire & set(m.record.source_turn_ids))
    live = {t for m in related if m.record.current for t in m.record.source_turn_ids}
    if retire - live:
        return None
    return _adds(state.facts, state.source_turn_ids, shown)


def _adds(facts: Sequence[str], turn_ids: tuple[str, ...], supersedes: tuple[uuid.UUID, ...]) -> list[Op]:
    """An ADD per fact; the first names what the turn replaces (an old memory is retired once)."""
    return [Op.add(fact, source_turn_ids=turn_ids, supersedes=supersedes if i == 0 else ()) for i, fact in enumerate(facts)]
