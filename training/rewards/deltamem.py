"""DeltaMem state reward: soft F1 between the predicted and the target memory state.

A state is a set of atomic memory texts. Only the differences are scored:

    Delta_pred   = S_pred \\ S_target         (extra or wrongly written memories)
    Delta_target = S_target \\ S_pred         (missing memories)

    gamma* = argmax_{gamma in Gamma} sum_{(i,j) in gamma} Phi_ij
        Gamma: one-to-one matchings between Delta_pred and Delta_target whose pairs have
        Phi_ij >= tau and whose predicted item was not written by an unintended UPDATE
    s_ij   = sum_{k in K_j} 1[k in x_i] / (|K_j| + eta)       keyword coverage of target j
    P_soft = sum_{gamma*} s_ij / (|Delta_pred| + eta)
    R_soft = sum_{gamma*} s_ij / (|Delta_target| + eta)
    R_state = 2 P_soft R_soft / (P_soft + R_soft + eta)       (1.0 when both deltas are empty)

    R = w_format R_format + w_retrieval R_retrieval + w_state R_state   (0.1 / 0.1 / 0.8)

Phi is what the caller's ``similarity`` returns (DeltaMem: embedding cosine); matching
maximises Phi but pays s_ij, so a paraphrase only earns what it covers of the target's
keywords. An UPDATE the target did not call for can rewrite a memory into something close to
a target item and so game Phi; such predicted items stay in Delta_pred (they count against
precision) but may not be matched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from .qa import answer_tokens

__all__ = [
    "DeltaMemConfig",
    "StateDeltas",
    "StateF1",
    "Similarity",
    "state_deltas",
    "match_deltas",
    "keyword_coverage",
    "default_keywords",
    "soft_state_f1",
    "deltamem_reward",
    "retrieval_score",
]

# (Delta_pred texts, Delta_target texts) -> Phi, an array of shape [len(pred), len(target)]
Similarity = Callable[[Sequence[str], Sequence[str]], "np.ndarray | Sequence[Sequence[float]]"]


@dataclass(frozen=True)
class DeltaMemConfig:
    # tau is not given in the DeltaMem summary; 0.5 suits cosine of normalised sentence
    # embeddings (MiniLM). Retune it with the similarity function.
    tau: float = 0.5
    eta: float = 1e-8
    w_format: float = 0.1
    w_retrieval: float = 0.1
    w_state: float = 0.8


class StateDeltas(NamedTuple):
    pred: tuple[str, ...]  # Delta_pred, in S_pred order
    target: tuple[str, ...]  # Delta_target, in S_target order


class StateF1(NamedTuple):
    precision: float
    recall: float
    f1: float  # R_state
    matches: tuple[tuple[int, int], ...]  # gamma*: (index in Delta_pred, index in Delta_target)
    deltas: StateDeltas


def state_deltas(s_pred: Sequence[str], s_target: Sequence[str]) -> StateDeltas:
    """Delta_pred = S_pred \\ S_target, Delta_target = S_target \\ S_pred (exact text, deduplicated).

    Order is kept (first occurrence) so that similarity rows and columns are reproducible.
    """
    pred, target = dict.fromkeys(s_pred), dict.fromkeys(s_target)
    return StateDeltas(tuple(p for p in pred if p not in target), tuple(t for t in target if t not in pred))


def match_deltas(
    similarity: np.ndarray, tau: float, forbidden_rows: Collection[int] = ()
) -> tuple[tuple[int, int], ...]:
    """gamma*: the one-to-one matching maximising sum Phi_ij over allowed pairs.

    Allowed: Phi_ij >= tau and row i not in ``forbidden_rows``; a pair with Phi_ij < 0 is
    never in gamma* (dropping it raises the sum), so it is disallowed too. Disallowed pairs
    get weight 0; a full assignment on those weights, minus its disallowed pairs, is an
    optimal partial matching because dropping a weight-0 pair loses nothing.
    """
    phi = np.asarray(similarity, dtype=float)  # [P, T]
    if phi.size == 0:
        return ()
    allowed = (phi >= tau) & (phi >= 0)
    allowed[list(forbidden_rows), :] = False
    weights = np.where(allowed, phi, 0.0)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return tuple((int(i), int(j)) for i, j in zip(rows, cols) if allowed[i, j])


def keyword_coverage(prediction: str, keywords: Collection[str], eta: float = 1e-8) -> float:
    """s_ij = sum_{k in K_j} 1[k in x_i] / (|K_j| + eta).

    "k in x_i" is membership among x_i's normalised tokens (not substring: "art" is not in
    "party"); multi-word keywords are not supported. No keywords -> 0.0.
    """
    tokens = set(answer_tokens(prediction))
    return sum(k in tokens for k in keywords) / (len(keywords) + eta)


def default_keywords(text: str) -> frozenset[str]:
    """K_j when none are annotated: the distinct normalised tokens of the target memory."""
    return frozenset(answer_tokens(text))


def soft_state_f1(
    s_pred: Sequence[str],
    s_target: Sequence[str],
    similarity: Similarity,
    *,
    unintended_update: Collection[str] = frozenset(),
    keywords: Callable[[str], Collection[str]] = default_keywords,
    config: DeltaMemConfig = DeltaMemConfig(),
) -> StateF1:
    """R_state, the soft F1 of the module docstring, with its parts.

    ``unintended_update``: texts of S_pred that an UPDATE the target did not call for wrote.
    ``keywords(target_text)``: K_j (annotated keywords where the data has them).
    Edge cases: both deltas empty (states equal) -> P = R = F1 = 1.0; exactly one empty ->
    0.0 for all three (eta keeps the formulas finite). ``similarity`` is only called when
    both deltas are non-empty.
    """
    deltas = state_deltas(s_pred, s_target)
    if not deltas.pred and not deltas.target:
        return StateF1(1.0, 1.0, 1.0, (), deltas)
    matches: tuple[tuple[int, int], ...] = ()
    if deltas.pred and deltas.target:
        forbidden = [i for i, text in enumerate(deltas.pred) if text in unintended_update]
        phi = np.asarray(similarity(deltas.pred, deltas.target), dtype=float)
        if phi.shape != (len(deltas.pred), len(deltas.target)):
            raise ValueError(f"similarity returned shape {phi.shape}, expected {(len(deltas.pred), len(deltas.target))}")
        matches = match_deltas(phi, config.tau, forbidden)
    true_positive = sum(
        keyword_coverage(deltas.pred[i], keywords(deltas.target[j]), config.eta) for i, j in matches
    )
    precision = true_positive / (len(deltas.pred) + config.eta)
    recall = true_positive / (len(deltas.target) + config.eta)
    f1 = 2 * precision * recall / (precision + recall + config.eta)
    return StateF1(precision, recall, f1, matches, deltas)


def deltamem_reward(
    format_score: float,
    retrieval_score: float,
    state_score: float,
    config: DeltaMemConfig = DeltaMemConfig(),
) -> float:
    """R = w_format R_format + w_retrieval R_retrieval + w_state R_state."""
    return config.w_format * format_score + config.w_retrieval * retrieval_score + config.w_state * state_score


def retrieval_score(wanted: Collection[Hashable], retrieved: Collection[Hashable]) -> float:
    """R_retrieval: the share of ``wanted`` memories that the trace ``retrieved`` before its
    ops; 1.0 when nothing was wanted (no memory to change, none changed).

    The environment (`training.env.deltamem_env`) wants every memory the trace's final replies
    UPDATE or DELETE (an alias never shown counts as a memory it did not retrieve) and every
    memory of the bank before that the target state changes; it retrieved what the pipeline's
    related search and its own lookups showed it.
    """
    wanted = set(wanted)
    if not wanted:
        return 1.0
    return len(wanted & set(retrieved)) / len(wanted)
