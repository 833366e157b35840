"""MemAgent outcome rewards for questions with several acceptable or required answers.

    equivalence:  R = max_{y in Y} 1[normalize(y) == normalize(y_hat)]
    coverage:     R = |{y in Y : y in y_hat}| / |Y|

Coverage is for tasks that ask for all answers (multi-value needle-in-a-haystack).
"y in y_hat" is read on normalised tokens: the gold's token sequence must occur contiguously
in the prediction's, so "10" is not found inside "100" and "cat" not inside "category".
"""

from __future__ import annotations

from collections.abc import Sequence

from .qa import answer_tokens, exact_match

__all__ = ["equivalence_reward", "coverage_reward"]


def equivalence_reward(prediction: object, golds: Sequence[object]) -> float:
    """max over acceptable answers of exact match; 0.0 when there are none."""
    return max((exact_match(prediction, g) for g in golds), default=0.0)


def _contains(haystack: list[str], needle: list[str]) -> bool:
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


def coverage_reward(prediction: object, golds: Sequence[object]) -> float:
    """Fraction of distinct gold answers whose tokens appear contiguously in the prediction.

    Golds are de-duplicated after normalisation (Y is a set); golds that normalise to nothing
    are dropped. No golds left -> 0.0.
    """
    needles = {tuple(t) for t in map(answer_tokens, golds) if t}
    if not needles:
        return 0.0
    haystack = answer_tokens(prediction)
    return sum(_contains(haystack, list(n)) for n in needles) / len(needles)
