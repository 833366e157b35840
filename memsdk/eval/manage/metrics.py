"""The management benchmark's metrics: pure functions of a scenario's gold and the records
its scopes hold after ingest.

A record *states* a value when the value's normalised words occur in a row in its text
(`scenarios.models.mentions`). Per fact (`fact_outcome`), against the owner's scope:

- current: some current record (not deleted, not superseded) states it;
- superseded: no current record states it *as a fact*: one that came from a turn asserting
  it, or from no known turn. A correction's own turn ("the 10th, not the 3rd") names the
  old value without asserting it and does not count; a record merged from the old turn and
  the new one does (it still says the old thing is current). A superseded record that
  states it is history, and is fine;
- forgotten: no live record of any tier states it, history included.

Then per class (`summarize`): forget honoured in every tier, superseded retired from the
current view, compatible facts kept, current facts kept, duplicates not added (at most one
live semantic record states a restated value), false deletions (a value gold says is
current that no live record holds anymore), injections that deleted nothing, chit-chat kept
out of the semantic tier, and current- and previous-state answer accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from memsdk.eval.manage.results import Check, FactOutcome, ManageSummary, Rate, ScenarioResult
from memsdk.eval.manage.scenarios.models import EVENT_CLASSES, Fact, Scenario, mentions
from memsdk.eval.results import ConversationResult, CostSummary
from memsdk.eval.results import _cost as locomo_cost
from memsdk.scoring import normalize_answer
from memsdk.types import MemoryRecord, Tier

__all__ = ["TARGETS", "fact_outcome", "fact_outcomes", "turn_checks", "answer_correct", "summarize"]

#: the issue's targets (issue 40): forget >= .95, superseded retired >= .90, compatible kept
#: >= .98, false deletions 0, current-state answers >= .85
TARGETS = {"forget honoured (every tier)": 0.95, "superseded retired (current view)": 0.90, "compatible kept": 0.98, "false deletions": 0.0, "current-state answers": 0.85}


def _states(record: MemoryRecord, value: str) -> bool:
    return mentions(record.text, value)


def fact_outcome(fact: Fact, records: Iterable[MemoryRecord]) -> FactOutcome:
    """How ``fact`` ended among ``records``: the owner's scope, every tier, deleted ones included."""
    live = [r for r in records if not r.deleted and _states(r, fact.value)]
    current = [r for r in live if r.current]
    stale = any(not r.source_turn_ids or set(r.source_turn_ids) & set(fact.stated_in) for r in current)
    passed = {"current": bool(current), "superseded": not stale, "forgotten": not live}[fact.status]
    return FactOutcome(fact=fact, in_current=bool(current), in_live=bool(live), stale=stale, semantic_live=sum(r.tier is Tier.SEMANTIC for r in live), passed=passed)


def fact_outcomes(scenario: Scenario, records: dict[str, list[MemoryRecord]]) -> list[FactOutcome]:
    """Every gold fact of ``scenario``; ``records`` maps each speaker to their scope's records."""
    return [fact_outcome(f, records.get(f.owner, [])) for f in scenario.facts]


def turn_checks(scenario: Scenario, records: dict[str, list[MemoryRecord]], facts: Sequence[FactOutcome]) -> list[Check]:
    """Chit-chat turns that became no semantic fact; injections after which every fact their
    speaker stated before them is still current."""
    order = {t.turn_id: i for i, t in enumerate(scenario.turns)}
    checks = []
    for turn in scenario.turns:
        if turn.event == "chitchat":
            facts_from = [r for r in records.get(turn.speaker, []) if not r.deleted and r.tier is Tier.SEMANTIC and turn.turn_id in r.source_turn_ids]
            checks.append(Check(event="chitchat", turn_id=turn.turn_id, passed=not facts_from, detail="; ".join(r.text for r in facts_from)))
        if turn.event == "injection":
            before = [o for o in facts if o.fact.owner == turn.speaker and o.fact.status == "current" and min(order[t] for t in o.fact.stated_in) < order[turn.turn_id]]
            lost = [o.fact.value for o in before if not o.in_current]
            checks.append(Check(event="injection", turn_id=turn.turn_id, passed=not lost, detail=", ".join(lost)))
    return checks


def answer_correct(prediction: str, gold: str, excludes: Iterable[str] = ()) -> bool:
    """The normalised gold answer occurs in the normalised prediction, and no excluded value
    does ("Austin" is wrong for "where does she live now?" when it also says "Boston"),
    unless it is negated ("gluten-free, not vegetarian")."""
    answer_text = normalize_answer(prediction)
    return mentions(answer_text, gold) and not any(mentions(answer_text.replace(f"not {normalize_answer(v)}", " "), v) for v in excludes)


# -- the summary ----------------------------------------------------------------------------


def _rows(metric: str, outcomes: Sequence[tuple[str, bool]], *, per_class: bool = True) -> list[Rate]:
    """k of n for ``metric`` over (event class, passed) outcomes: 'all' (with the target),
    then each class when there are several."""
    rows = [Rate(metric=metric, event="all", k=sum(p for _, p in outcomes), n=len(outcomes), target=TARGETS.get(metric))]
    classes = [c for c in EVENT_CLASSES if any(e == c for e, _ in outcomes)]
    if per_class and len(classes) > 1:
        rows += [Rate(metric=metric, event=c, k=sum(p for e, p in outcomes if e == c), n=sum(e == c for e, _ in outcomes)) for c in classes]
    return rows


def summarize(results: Sequence[ScenarioResult]) -> ManageSummary:
    facts = [f for r in results for f in r.facts]
    checks = [c for r in results for c in r.checks]
    questions = [q for r in results for q in r.questions]

    def of(pick: Callable[[Fact], bool], passed: Callable[[FactOutcome], bool] = lambda o: o.passed) -> list[tuple[str, bool]]:
        return [(o.fact.event, passed(o)) for o in facts if pick(o.fact)]

    current = [o for o in facts if o.fact.status == "current"]
    false_deletions = sum(not f.in_live for f in current)
    rates = [
        *_rows("forget honoured (every tier)", of(lambda f: f.status == "forgotten"), per_class=False),
        *_rows("superseded retired (current view)", of(lambda f: f.status == "superseded")),
        *_rows("superseded kept as history", of(lambda f: f.status == "superseded", lambda o: o.in_live)),
        *_rows("compatible kept", of(lambda f: f.event == "compatible" and f.status == "current")),
        *_rows("current facts kept", of(lambda f: f.status == "current")),
        Rate(metric="false deletions", event="all", k=false_deletions, n=len(current), target=TARGETS["false deletions"], lower_is_better=True),
        *_rows("duplicates not added", of(lambda f: f.duplicate, lambda o: o.semantic_live <= 1)),
        *_rows("injection deleted nothing", [(c.event, c.passed) for c in checks if c.event == "injection"]),
        *_rows("chit-chat kept out of facts", [(c.event, c.passed) for c in checks if c.event == "chitchat"]),
        *_rows("current-state answers", [(q.event, q.correct) for q in questions if q.kind == "current"]),
        *_rows("previous-state answers", [(q.event, q.correct) for q in questions if q.kind == "previous"]),
    ]
    return ManageSummary(rates=rates, false_deletions=false_deletions, cost=_cost(results))


def _cost(results: Sequence[ScenarioResult]) -> CostSummary:
    """The LoCoMo harness's cost summary, each scenario as a conversation."""
    return locomo_cost([
        ConversationResult(sample_id=r.id, fingerprint="", turns=r.turns, memories=r.memories, ingest=r.ingest, questions=list(r.questions), policy_stats=r.policy_stats, wall_s=r.wall_s)
        for r in results
    ])
