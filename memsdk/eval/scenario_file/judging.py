"""Judging a scenario file's checks and answers: pure functions over records and text.

`check_records` applies the keep / gone / limit checks of `models` to the records a scope
holds at the end (deleted ones included, so a keep that failed can say whether the fact was
retired or never stored). `answer_contains` is the answer rule: the gold's words all occur
in the prediction, after `memsdk.scoring.normalize_answer` (case, punctuation, articles)
with number words read as digits. `class_rows` is the per-class table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memsdk.eval.scenario_file.models import AnsweredQuestion, CheckOutcome, ClassRow, IsolationOutcome, Scenario, ScenarioOutcome
from memsdk.scoring import answer_tokens
from memsdk.types import MemoryRecord, Tier

__all__ = ["scenario_class", "check_records", "answer_contains", "class_rows", "CLASSES"]

#: the classes a scenario is reported under when it does not name one, from its checks
CLASSES = ("forget", "replaced", "corrected", "kept")

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NOW = re.compile(r"\b(?:now|currently|these days|at the moment|still)\b", re.I)
_BEFORE = re.compile(r"\b(?:before|previous(?:ly)?|used to|former(?:ly)?|old)\b", re.I)


def scenario_class(sc: Scenario) -> str:
    """The scenario's own ``class``, else what its gone checks say it tests: a forget (gone
    from every tier), a correction (gone from the current view), a replacement (gone from
    managed memory); a scenario with no gone check tests that facts are kept."""
    if sc.scenario_class:
        return sc.scenario_class
    if not sc.gone:
        return "kept"
    return {None: "forget", "current": "corrected", "managed": "replaced"}[sc.gone_tiers]


def _has(record: MemoryRecord, needle: str) -> bool:
    return needle.casefold() in record.text.casefold()


def _shown(record: MemoryRecord) -> str:
    return f"{record.tier}: {record.text[:160]}"


def _semantic_current(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    return [r for r in records if r.tier is Tier.SEMANTIC and r.current]


def check_records(sc: Scenario, records: Sequence[MemoryRecord]) -> list[CheckOutcome]:
    """Each check of ``sc`` against ``records``: every record of the scenario's scope,
    deleted ones included."""
    current = [r for r in records if r.current]
    out = []
    for needle in sc.keep:
        holding = [r for r in current if _has(r, needle)]
        out.append(CheckOutcome(kind="keep", target=needle, passed=bool(holding), found_in=[_shown(r) for r in holding[:3]], retired=not holding and any(_has(r, needle) for r in records)))
    for needle in sc.gone:
        if sc.gone_tiers is None:
            breaking = [r for r in records if not r.deleted and _has(r, needle)]
        elif sc.gone_tiers == "managed":
            breaking = [r for r in current if r.tier is not Tier.EPISODIC and _has(r, needle)]
        else:
            breaking = [r for r in current if _has(r, needle)]
        out.append(CheckOutcome(kind="gone", target=needle, tiers=sc.gone_tiers or "all", passed=not breaking, found_in=[_shown(r) for r in breaking]))
    semantic = _semantic_current(records)
    for key, most in sc.max_memories_matching.items():
        matching = [r for r in semantic if _has(r, key)]
        out.append(CheckOutcome(kind="limit", target=f"{key!r} in at most {most}", passed=len(matching) <= most, found_in=[_shown(r) for r in matching]))
    if sc.max_memories_total is not None:
        out.append(CheckOutcome(kind="limit", target=f"at most {sc.max_memories_total} in all", passed=len(semantic) <= sc.max_memories_total, found_in=[_shown(r) for r in semantic]))
    return out


def _words(text: str) -> list[str]:
    return [_NUMBER_WORDS.get(w, w) for w in answer_tokens(text)]


def answer_contains(prediction: str, gold: str) -> bool:
    """Every word of ``gold`` occurs in ``prediction`` (normalised, number words as digits)."""
    wanted = _words(gold)
    predicted_words = set(_words(prediction))
    return bool(wanted) and all(w in predicted_words for w in wanted)


def _rate(name: str, hits: Sequence[bool]) -> ClassRow:
    return ClassRow(name=name, k=sum(hits), n=len(hits))


def class_rows(outcomes: Sequence[ScenarioOutcome], isolation: IsolationOutcome | None = None) -> list[ClassRow]:
    """The per-class table: scenarios passing (all, then by class), each kind of check,
    false retirements (lower is better), the answers and retrieval, isolation."""
    classes = [c for c in (*CLASSES, *sorted({o.scenario_class for o in outcomes} - set(CLASSES))) if any(o.scenario_class == c for o in outcomes)]
    checks = [c for o in outcomes for c in o.checks]
    questions: list[AnsweredQuestion] = [q for o in outcomes for q in o.questions]
    rows = [_rate("scenarios passing", [o.passed for o in outcomes])]
    rows += [_rate(f"scenarios passing: {c}", [o.passed for o in outcomes if o.scenario_class == c]) for c in classes]
    for name, kind, tiers in (
        ("forget honoured in every tier", "gone", "all"), ("replaced, gone from the current view", "gone", "managed"),
        ("corrected, gone from the current view", "gone", "current"), ("kept facts still current", "keep", None), ("memory limits held", "limit", None),
    ):
        if hits := [c.passed for c in checks if c.kind == kind and (tiers is None or c.tiers == tiers)]:
            rows.append(_rate(name, hits))
    keeps = [c for c in checks if c.kind == "keep"]
    rows.append(_rate("false retirements (a kept fact retired or deleted; lower is better)", [c.retired for c in keeps]))
    if questions:
        rows.append(_rate("answers containing the gold", [q.correct for q in questions]))
        for name, pattern in (("'now' questions", _NOW), ("'before' questions", _BEFORE)):
            if asked := [q.correct for q in questions if pattern.search(q.question)]:
                rows.append(_rate(f"answers containing the gold: {name}", asked))
        rows.append(_rate("gold in the top 3 of retrieve()", [q.gold_in_top3 for q in questions]))
        rows.append(_rate("answers containing the gold, where the top 3 holds it", [q.correct for q in questions if q.gold_in_top3]))
    if isolation is not None:
        rows.append(_rate("isolation held", [isolation.passed]))
    return rows
