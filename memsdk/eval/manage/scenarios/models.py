"""The scenarios' data: a conversation's turns, its gold (each fact with the status it must
end in, and questions about the current and the previous state) and the episodes behind it.

`mentions` says what a fact's distinctive value is held to: a text states a value when the
value's normalised words appear in it in a row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from memsdk.scoring import normalize_answer
from memsdk.types import Scope, Turn

__all__ = ["EventClass", "EVENT_CLASSES", "Status", "ScenarioSplit", "ScenarioTurn", "Fact", "Question", "Episode", "Scenario", "mentions"]

EventClass = Literal["state", "supersede", "correct_not", "correct_plain", "forget", "compatible", "duplicate", "chitchat", "injection", "relative_date"]
EVENT_CLASSES: tuple[EventClass, ...] = get_args(EventClass)
#: current: in the current view; superseded: not in it (history may keep it); forgotten: in no live record of any tier
Status = Literal["current", "superseded", "forgotten"]
ScenarioSplit = Literal["train", "val", "test", "demo"]


def mentions(text: str, value: str) -> bool:
    """Whether ``text`` states ``value``: its normalised words appear in a row in the
    normalised text (`memsdk.scoring.normalize_answer`: case, punctuation, articles)."""
    needle = normalize_answer(value)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


class ScenarioTurn(BaseModel):
    model_config = ConfigDict(frozen=True)

    speaker: str
    text: str
    timestamp: datetime | str
    turn_id: str
    event: EventClass | None = None  # the event this turn carries out; None: the statement of a fact
    templates: tuple[str, ...] = ()

    def turn(self) -> Turn:
        return Turn(speaker=self.speaker, text=self.text, timestamp=self.timestamp, turn_id=self.turn_id)


class Fact(BaseModel):
    """A value with the status it must end in, in the scope of the speaker who stated it."""

    model_config = ConfigDict(frozen=True)

    value: str
    status: Status
    event: EventClass  # the class whose outcome this fact measures
    slot: str
    owner: str
    stated_in: tuple[str, ...]  # the turns that assert it (a correction that names it as wrong does not)
    replaced_by: str | None = None
    duplicate: bool = False  # restated: at most one live semantic record may state it
    answer: str | None = None  # what a question about it is answered with, when not the value (a resolved date)


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    gold: str
    kind: Literal["current", "previous"]
    event: EventClass
    slot: str
    owner: str
    excludes: tuple[str, ...] = ()  # values a right answer does not give (about now: the value the gold replaced)


class Episode(BaseModel):
    model_config = ConfigDict(frozen=True)

    event: EventClass
    slot: str
    owner: str
    turn_ids: tuple[str, ...]  # in order: the fact's statement first, then the event's turns


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    split: ScenarioSplit
    speakers: tuple[str, str]
    turns: tuple[ScenarioTurn, ...]
    facts: tuple[Fact, ...]
    questions: tuple[Question, ...]
    episodes: tuple[Episode, ...]
    templates: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def scope(self, speaker: str) -> Scope:
        """One scope per speaker: user_id the speaker lowercased, run_id the scenario."""
        return Scope(user_id=speaker.lower(), run_id=self.id)

    def scopes(self) -> tuple[Scope, Scope]:
        a, b = self.speakers
        return self.scope(a), self.scope(b)

    def turn(self, turn_id: str) -> ScenarioTurn:
        return next(t for t in self.turns if t.turn_id == turn_id)
