"""The demo split: the demo conversation (examples/data/demo_conversation.json) with its gold
derived from its questions, and `scenarios`, a split's scenarios, generated or the demo."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from memsdk.eval.manage.scenarios.generator import generate
from memsdk.eval.manage.scenarios.models import Episode, EventClass, Fact, Question, Scenario, ScenarioSplit, ScenarioTurn, mentions

__all__ = ["demo_scenario", "scenarios"]

#: what the demo's questions cannot say: the events behind the answers, and the values they retired
_DEMO_EVENTS: dict[str, EventClass] = {"school nurse": "supersede", "York": "supersede", "Hanna": "correct_not", "19 April": "correct_not"}
_DEMO_RETIRED = (
    Fact(value="Anna", status="superseded", event="correct_not", slot="family", owner="Leo", stated_in=("D1:4",), replaced_by="Hanna"),
    Fact(value="12 April", status="superseded", event="correct_not", slot="schedule", owner="Leo", stated_in=("D1:2",), replaced_by="19 April"),
    Fact(value="Leeds", status="superseded", event="supersede", slot="home", owner="Maya", stated_in=("D1:3",), replaced_by="York"),
    Fact(value="St. Mary's", status="superseded", event="supersede", slot="job", owner="Maya", stated_in=("D1:3",), replaced_by="school nurse"),
    Fact(value="07700 900123", status="forgotten", event="forget", slot="phone", owner="Maya", stated_in=("D1:5",)),
)
_DEMO_EPISODES = (
    Episode(event="correct_not", slot="family", owner="Leo", turn_ids=("D1:4", "D2:1")),
    Episode(event="correct_not", slot="schedule", owner="Leo", turn_ids=("D1:2", "D2:5")),
    Episode(event="supersede", slot="home", owner="Maya", turn_ids=("D1:3", "D2:4")),
    Episode(event="supersede", slot="job", owner="Maya", turn_ids=("D1:3", "D2:2")),
    Episode(event="forget", slot="phone", owner="Maya", turn_ids=("D1:5", "D3:1")),
)
_DEMO_PREVIOUS = (("Which city did Maya live in before York?", "Leeds", "home", "Maya"), ("Where did Maya work before she became a school nurse?", "St. Mary's", "job", "Maya"))


def _demo_path() -> Path:
    return Path(os.environ.get("MEMSDK_DEMO_FILE", Path(__file__).resolve().parents[4] / "examples" / "data" / "demo_conversation.json"))


def _stated_form(answer: str, texts: Iterable[str]) -> str:
    """The longest run of the answer's words that the evidence states ("19 April 2025" is said as "19 April")."""
    words, evidence = answer.split(), list(texts)
    spans = (" ".join(words[i : i + n]) for n in range(len(words), 0, -1) for i in range(len(words) - n + 1))
    return next((s for s in spans if any(mentions(t, s) for t in evidence)), answer)


def demo_scenario(path: str | Path | None = None) -> Scenario:
    """The demo conversation with its gold: the current facts and questions from its QA (the
    value as the evidence states it, its owner the evidence's speaker); the values the
    corrections, the move and the forget request retired, and two previous-state questions,
    annotated here (`_DEMO_RETIRED`), since the file's questions ask only about the present."""
    from memsdk.datasets.locomo import load_locomo

    conv = load_locomo(str(path or _demo_path()))[0]
    raw = conv.turns()
    by_id = {t.turn_id: t for t in raw}
    turns = tuple(ScenarioTurn(speaker=t.speaker, text=t.text, timestamp=t.timestamp or "", turn_id=t.turn_id or "") for t in raw)
    facts: list[Fact] = []
    questions: list[Question] = []
    for qa in conv.questions():
        evidence = [by_id[e] for e in qa.evidence]
        value = _stated_form(qa.answer, (t.text for t in evidence))
        event = _DEMO_EVENTS.get(value, "state")
        owner = evidence[0].speaker
        facts.append(Fact(value=value, status="current", event=event, slot="demo", owner=owner, stated_in=tuple(qa.evidence)))
        replaced = tuple(f.value for f in _DEMO_RETIRED if f.replaced_by == value)
        questions.append(Question(text=qa.question, gold=qa.answer, kind="current", event=event, slot="demo", owner=owner, excludes=replaced))
    questions += [Question(text=q, gold=gold, kind="previous", event="supersede", slot=slot, owner=owner) for q, gold, slot, owner in _DEMO_PREVIOUS]
    return Scenario(id=conv.sample_id, split="demo", speakers=conv.speakers, turns=turns, facts=(*facts, *_DEMO_RETIRED), questions=tuple(questions), episodes=_DEMO_EPISODES, names=conv.speakers)


def scenarios(split: ScenarioSplit, n: int | None = None, *, seed: int = 0) -> list[Scenario]:
    """A split's scenarios: generated for train / val / test, the demo conversation for ``demo``."""
    if split == "demo":
        return [demo_scenario()]
    return generate(split, n, seed=seed)
