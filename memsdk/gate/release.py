"""The release gate from states to decision: which states a comparison replays, both versions
replayed over them, and the paired decision (`decide`).

The clients' ``evaluate_policy`` and ``promote`` call this module with what only they know
(the versions' policy objects, the answerer serving now, their log and bank), then record the
decision beside the candidate's manifest; nothing here starts a client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memsdk.bank import MemoryBank
from memsdk.embedding.base import Embedder
from memsdk.errors import InvalidInput
from memsdk.gate.replay import ManagerReplay, areplay_answerer, areplay_manager, replay_answerer, replay_manager
from memsdk.gate.states import AnswerCase, ManagerCase, load_answer_cases, locomo_answer_cases, log_answer_cases, log_manager_cases
from memsdk.gate.stats import GateConfig, GateDecision, SideResult, decide
from memsdk.interactions import InteractionLog
from memsdk.policies import Manager

__all__ = ["GateStates", "label", "states", "compare", "acompare"]

#: what the release gate replays: "locomo-val", "log" (the app's judged traffic), a JSONL file
#: of answerer states, or the states themselves (`AnswerCase` for the answerer, `ManagerCase`
#: for the manager, whose states come from the log only)
GateStates = str | os.PathLike[str] | Sequence[AnswerCase | ManagerCase]


def label(on: GateStates) -> str:
    """How a gate decision names its states."""
    return f"{len(on)} given states" if isinstance(on, (list, tuple)) else str(on)


def states(role: str, on: GateStates, *, log: InteractionLog | None, bank: MemoryBank, embedder: Embedder, k: int | None = None, manager: Manager | None = None) -> list[Any]:
    """The states ``role`` is gated on: ``on`` itself (a list of states), the app's judged
    traffic in ``log`` over ``bank``, LoCoMo validation (``k`` memories per state, banks built
    with ``manager``, the heuristic one when None) or a JSONL file of answerer states.
    `InvalidInput` names what is wrong with ``on``."""
    if role == "extractor":
        raise InvalidInput("role", "the release gate replays the answerer and the manager, not the extractor; promote(..., force=True) switches it and is recorded in the audit trail")
    kind = AnswerCase if role == "answerer" else ManagerCase
    if isinstance(on, (list, tuple)):
        if not on or not all(isinstance(c, kind) for c in on):
            raise InvalidInput("on", f"expected a non-empty sequence of {kind.__name__} states for the {role}")
        return list(on)
    if str(on) == "log":
        if log is None:
            raise InvalidInput("on", "'log' needs the interaction log, which this client does not keep (log_interactions=False)")
        cases: list[Any] = log_answer_cases(log, bank) if role == "answerer" else log_manager_cases(log, bank)
        if not cases:
            raise InvalidInput("on", f"the interaction log holds no judged answer (client.feedback with a gold or correct=True) {'to replay' if role == 'answerer' else 'citing a memory an ingest with facts wrote'}")
        return cases
    if role == "manager":
        raise InvalidInput("on", f"the manager's gate replays the app's own traffic: 'log' or a list of ManagerCase, got {str(on)!r}")
    if str(on) == "locomo-val":
        if k is None:
            raise InvalidInput("k", "LoCoMo validation states need the memories per state")
        return locomo_answer_cases(embedder, split="val", k=k, manager=manager)
    if not isinstance(on, (str, os.PathLike)) or not Path(on).is_file():
        raise InvalidInput("on", f"expected 'locomo-val', 'log', a JSONL file of states or a list of AnswerCase, got {str(on)!r}")
    return load_answer_cases(on)


def compare(role: str, sides: Sequence[tuple[str, Any]], cases: Sequence[Any], *, on: GateStates, config: GateConfig, frozen: ManagerReplay | None = None) -> GateDecision:
    """Replay each of ``sides`` ((version, policy): the candidate, then the incumbent) over
    ``cases`` and decide; ``frozen`` holds what a manager's replay keeps fixed."""
    results = [_replay(role, version, policy, cases, frozen) for version, policy in sides]
    return decide(role, results[0], results[1], on=label(on), config=config)


async def acompare(role: str, sides: Sequence[tuple[str, Any]], cases: Sequence[Any], *, on: GateStates, config: GateConfig, frozen: ManagerReplay | None = None) -> GateDecision:
    """`compare` with the policies' LLM calls awaited."""
    results = [await _areplay(role, version, policy, cases, frozen) for version, policy in sides]
    return decide(role, results[0], results[1], on=label(on), config=config)


def _replay(role: str, version: str, policy: Any, cases: Sequence[Any], frozen: ManagerReplay | None) -> SideResult:
    if role == "answerer":
        return replay_answerer(policy, version, cases)
    return replay_manager(policy, version, cases, _frozen(frozen))


async def _areplay(role: str, version: str, policy: Any, cases: Sequence[Any], frozen: ManagerReplay | None) -> SideResult:
    if role == "answerer":
        return await areplay_answerer(policy, version, cases)
    return await areplay_manager(policy, version, cases, _frozen(frozen))


def _frozen(frozen: ManagerReplay | None) -> ManagerReplay:
    if frozen is None:
        raise InvalidInput("frozen", "a manager's replay needs the answerer and the sizes it holds fixed")
    return frozen
