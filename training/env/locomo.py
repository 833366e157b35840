"""LoCoMo as environment data: per-turn manager states (Memory-R1) and session episodes (Memory-R2).

The conversations come from the runtime's loader (`memsdk.datasets.locomo`: file location,
split, typed turns and QA); this module only turns them into environment states.

Memory-R1's recipe, per dialogue turn x_i of a conversation:

    M_old(i) = the memory built from turns x_1..x_{i-1}
    Q(i)     = { QA items whose evidence contains x_i's dia_id, category != 5 }
    state    = (M_old(i), facts(x_i), Q(i))        kept only when Q(i) is non-empty

M_old is built cheaply and by the runtime's own means: each earlier turn becomes one memory,
the heuristic extractor's "Speaker (on date): text", ADDed with ``source_turn_ids=(dia_id,)``
through `MemoryBank.apply` on an in-memory bank. The bank grows turn by turn and is
snapshotted at each state, so every turn's words are embedded once per conversation (a session's
headers once, through a cache) and states are
produced lazily: taking three states builds three snapshots, not the whole dataset.

Split (as in Memory-R1 and Memory-R2): conv-26 train, conv-30 validation, the other eight
test. Category 5 (adversarial, no gold answer) is never used.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from memsdk.bank import BankLimits, MemoryBank
from memsdk.datasets.locomo import LocomoConversation, Split, load_locomo, locomo_path, session_date, split_of
from memsdk.embedding import CachedEmbedder, Embedder
from memsdk.policies import HeuristicExtractor
from memsdk.store.memory import InMemoryTransport
from memsdk.types import Actor, Op, Scope, Turn

from .episodes import Episode, Session
from .state import MemoryState, QAItem

__all__ = [
    "Split",
    "conversation",
    "locomo_path",
    "locomo_qa",
    "locomo_states",
    "locomo_episode",
    "locomo_sessions",
    "sample_ids",
    "session_date",
    "split_of",
]

PathLike = str | os.PathLike[str] | None
# the memories of a state's bank were written by this builder, not by a trained policy
BUILDER = Actor(role="locomo-builder", version=HeuristicExtractor.version)


def _load(path: PathLike) -> tuple[LocomoConversation, ...]:
    return load_locomo(None if path is None else str(path))


def sample_ids(split: Split | None = None, path: PathLike = None) -> list[str]:
    return [c.sample_id for c in _load(path) if split is None or c.split == split]


def conversation(sample_id: str, path: PathLike = None) -> LocomoConversation:
    for c in _load(path):
        if c.sample_id == sample_id:
            return c
    raise KeyError(f"no LoCoMo conversation {sample_id!r}")


def locomo_sessions(conv: LocomoConversation) -> list[tuple[str, list[Turn]]]:
    """(session key, its turns) in order; each turn is stamped with its session's day."""
    return [
        (f"{conv.sample_id}/session_{s.index}", [t.model_copy(update={"timestamp": session_date(s.date_time)}) for t in s.turns])
        for s in conv.sessions
        if s.turns
    ]


def locomo_qa(conv: LocomoConversation) -> list[QAItem]:
    """The scored QA items (category 5 excluded) as environment QA items."""
    return [QAItem(q.question, q.answer, q.evidence, q.category) for q in conv.questions()]


def _apply_in_batches(bank: MemoryBank, scope: Scope, ops: Sequence[Op]) -> None:
    step = bank.limits.max_ops_per_batch
    for start in range(0, len(ops), step):
        bank.apply(scope, ops[start : start + step], actor=BUILDER)


def _conversation_states(conv: LocomoConversation, embedder: Embedder, limits: BankLimits) -> Iterator[MemoryState]:
    scope = Scope(user_id="locomo", run_id=conv.sample_id)
    linked: dict[str, list[QAItem]] = defaultdict(list)
    for item in locomo_qa(conv):
        for dia_id in dict.fromkeys(item.evidence):
            linked[dia_id].append(item)
    # a memory's header ("Melanie (on 8 May, 2023)") is embedded apart from its words and
    # repeats for every turn of a session: the cache makes it one embedding a session
    bank = MemoryBank(InMemoryTransport(embedder.dim), CachedEmbedder(embedder), limits=limits)
    extractor = HeuristicExtractor(min_words=1)  # every turn is a memory, "ok!" included
    pending: list[Op] = []  # turns not yet in the bank: embedded together, once, at the next state
    for _, turns in locomo_sessions(conv):
        for turn in turns:
            dia_id = turn.turn_id or ""
            facts = tuple(extractor.extract(turn).facts)
            if linked.get(dia_id) and facts:
                _apply_in_batches(bank, scope, pending)
                pending = []
                yield MemoryState(key=f"{conv.sample_id}/{dia_id}", bank=bank.snapshot(scope), facts=facts, qa=tuple(linked[dia_id]), turn=turn)
            pending += [Op.add(fact, source_turn_ids=(dia_id,)) for fact in facts]


def locomo_states(
    embedder: Embedder,
    *,
    split: Split | None = None,
    ids: Iterable[str] | None = None,
    path: PathLike = None,
    limits: BankLimits = BankLimits(),
) -> Iterator[MemoryState]:
    """Memory-R1 manager states, lazily, conversation by conversation in dataset order.

    ``ids`` picks conversations (e.g. ``["conv-26"]``), ``split`` picks a split; both None
    means every conversation. ``itertools.islice(locomo_states(e, split="train"), 3)``
    builds three states.
    """
    for sample_id in list(ids) if ids is not None else sample_ids(split, path):
        yield from _conversation_states(conversation(sample_id, path), embedder, limits)


def locomo_episode(sample_id: str, *, max_sessions: int | None = None, path: PathLike = None) -> Episode:
    """A Memory-R2 episode: the first ``max_sessions`` sessions (the curriculum's 8 -> 16 -> 32).

    Each QA item is asked after the session holding its latest evidence turn, the first
    point at which memory can answer it. Evidence ids that name no turn (a few LoCoMo ids
    are malformed) are ignored; items with evidence beyond the kept sessions, or with no
    valid evidence left, are left out.
    """
    conv = conversation(sample_id, path)
    every = locomo_sessions(conv)
    sessions = every[:max_sessions]
    exists = {turn.turn_id for _, turns in every for turn in turns}
    session_of = {turn.turn_id: i for i, (_, turns) in enumerate(sessions) for turn in turns}
    linked: dict[int, list[QAItem]] = defaultdict(list)
    for item in locomo_qa(conv):
        evidence = [e for e in item.evidence if e in exists]
        if evidence and all(e in session_of for e in evidence):
            linked[max(session_of[e] for e in evidence)].append(item)
    return Episode(
        key=sample_id,
        scope=Scope(user_id="locomo", run_id=sample_id),
        sessions=tuple(Session(key=key, turns=tuple(turns), qa=tuple(linked[i])) for i, (key, turns) in enumerate(sessions)),
    )
