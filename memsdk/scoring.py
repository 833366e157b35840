"""Answer-quality metrics: exact match, token F1 and BLEU-1, plus evidence recall@k.

The one implementation of these scores: the evaluation harness reports them and the trainer
(`memsdk_training.rewards.qa` re-exports them) uses them as rewards, so a reward and the
number reported on LoCoMo are the same quantity. All three answer metrics score a predicted
answer against one gold answer after the same normalisation.

Normalisation (SQuAD's ``normalize_answer``, which the LoCoMo evaluation copies):
lowercase -> drop ASCII punctuation -> drop the articles a/an/the -> collapse whitespace.
Two deliberate differences from LoCoMo's ``evaluation.py``: it also removes the word "and"
and Porter-stems tokens before F1; we do neither, so our F1 is the SQuAD one the Memory-R1
and Mem0 tables report.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "normalize_answer", "answer_tokens", "exact_match", "token_f1", "bleu1", "evidence_ids", "evidence_recall",
    "session_of", "session_recall", "chance_session_recall", "chance_recall",
]  # fmt: skip

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: object) -> str:
    """lower(text) -> strip punctuation -> remove a/an/the -> single spaces.

    Takes any object because LoCoMo stores some gold answers as ints (years, counts).
    """
    lowered = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def answer_tokens(text: object) -> list[str]:
    """Whitespace tokens of ``normalize_answer(text)``."""
    return normalize_answer(text).split()


def exact_match(prediction: object, gold: object) -> float:
    """EM = 1 if normalize(prediction) == normalize(gold) else 0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _clipped_overlap(pred: list[str], gold: list[str]) -> int:
    """Number of prediction tokens matched by gold tokens, each gold token used at most once."""
    return sum((Counter(pred) & Counter(gold)).values())


def token_f1(prediction: object, gold: object) -> float:
    """SQuAD token F1 on normalised tokens.

    P = |pred ∩ gold| / |pred|,  R = |pred ∩ gold| / |gold|  (multiset intersection),
    F1 = 2PR / (P + R);  F1 = 0 when nothing overlaps.
    If either side normalises to no tokens, F1 = 1 when both do and 0 otherwise (SQuAD).
    """
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    common = _clipped_overlap(pred, ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: object, gold: object) -> float:
    """Sentence BLEU-1 on normalised tokens (Papineni et al. 2002, eqs. 1-2 with N = 1).

    BLEU-1 = BP * p1,  p1 = clipped unigram matches / |pred|,
    BP = 1 if |pred| > |gold| else exp(1 - |gold| / |pred|).

    Smoothing: the one LoCoMo / Mem0 / Memory-R1 use, nltk's ``SmoothingFunction().method1``
    (a zero n-gram precision numerator is replaced by epsilon = 0.1). For N = 1 it never
    applies: nltk's ``sentence_bleu`` returns 0 before smoothing when there is no unigram
    match, and so do we. That is also what a reward wants: smoothing would pay a one-word
    wrong answer 0.1 and so teach the policy to answer wrong but short. The result equals
    ``sentence_bleu([gold], pred, weights=(1, 0, 0, 0), smoothing_function=method1)`` on
    these tokens. Both empty -> 1.0, as ``token_f1``.
    """
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    matches = _clipped_overlap(pred, ref)
    if matches == 0:
        return 0.0
    brevity = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return brevity * matches / len(pred)


_DIALOGUE_ID = re.compile(r"D\d+:\d+")


def evidence_ids(raw: Iterable[str]) -> frozenset[str]:
    """The dialogue ids (``D3:7``) in LoCoMo ``evidence`` entries.

    A few entries hold several ids in one string (``"D8:6; D9:17"``) or carry stray spaces or colons (``"D:11:26"``),
    so ids are found by pattern rather than taken verbatim.
    """
    return frozenset(m for item in raw for m in _DIALOGUE_ID.findall(item.replace(" ", "").replace("D:", "D")))


def evidence_recall(ranked_sources: Sequence[Iterable[str]], evidence: Iterable[str], k: int) -> float | None:
    """Recall@k = |evidence ∩ (source turn ids of the top-k memories)| / |evidence|.

    ``ranked_sources`` holds, best first, the source turn ids of each retrieved memory (a
    memory merged from several turns counts for all of them). None when the question has no
    evidence ids: it cannot be scored, and must not count as 0 or 1.
    """
    gold = evidence_ids(evidence)
    if not gold:
        return None
    seen = {turn for sources in ranked_sources[:k] for turn in sources}
    return len(gold & seen) / len(gold)


def session_of(turn_id: str) -> str:
    """The session a LoCoMo dialogue id belongs to: ``D3`` for ``D3:7``."""
    return turn_id.split(":", 1)[0]


def session_recall(ranked_sources: Sequence[Iterable[str]], evidence: Iterable[str], k: int) -> tuple[float | None, float | None]:
    """(recall_any@k, recall_all@k) at the session level, the way LoCoMo results are reported
    elsewhere: the sessions of the retrieved memories' source turns, each counted once in the
    order first retrieved, the first ``k`` of them; any: 1 when an evidence session is among
    them, all: 1 when every one is. (None, None) without evidence ids, as `evidence_recall`."""
    gold = {session_of(t) for t in evidence_ids(evidence)}
    if not gold:
        return None, None
    top: list[str] = []
    for sources in ranked_sources:
        for session in sorted({session_of(t) for t in sources}):
            if session not in top:
                top.append(session)
        if len(top) >= k:
            break
    kept = set(top[:k])
    return float(bool(gold & kept)), float(gold <= kept)


def chance_session_recall(sessions: int, gold: int, k: int) -> tuple[float, float]:
    """The expected (recall_any@k, recall_all@k) of the ``sessions`` ranked at random, ``gold``
    of them evidence: hypergeometric, P(no evidence session among k) and P(all among k)."""
    if not 0 < gold <= sessions:
        raise ValueError(f"need 0 < gold <= sessions, got gold={gold}, sessions={sessions}")
    k = min(k, sessions)
    total = math.comb(sessions, k)
    return 1.0 - math.comb(sessions - gold, k) / total, (math.comb(sessions - gold, k - gold) / total if k >= gold else 0.0)


def chance_recall(turns: int, k: int) -> float:
    """The expected turn-level recall@k of the ``turns`` ranked at random: each evidence turn is
    in the first k with probability k / turns."""
    if turns < 1:
        raise ValueError(f"need at least one turn, got {turns}")
    return min(k, turns) / turns
