"""The scenario file's shape (``memsdk eval scenarios FILE``) and the shape of its report.

A scenario file is what an app builder writes to test a memory configuration on their own
users' words: short conversations, ingested in order into one scope, then checks on what
the memory holds and questions it must answer. The format is the one of
``scenarios-dev.json`` (written outside the team); every field is validated here, so a
malformed file fails with the field and the reason before anything is ingested.

Check semantics (`judging` applies them):

    keep                 a current record (live, not superseded) of any tier contains it
    gone, gone_tiers=    none: no listed (not deleted) record of any tier contains it (a forget)
                         "managed": no current semantic or core record does (a replacement:
                         the verbatim turn may stay as history)
                         "current": no current record of any tier does (a correction)
    max_memories_matching  at most N current semantic records contain the key
    max_memories_total     at most N current semantic records in all

Substrings are matched case-insensitively. A scenario passes when all its checks hold.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memsdk.eval.results import RunInfo

__all__ = [
    "GoneTiers", "ScenarioTurn", "ScenarioQuestion", "Scenario", "Isolation", "ScenarioFile",
    "CheckOutcome", "AnsweredQuestion", "ScenarioOutcome", "IsolationOutcome", "ClassRow", "ScenarioFileReport",
]  # fmt: skip

GoneTiers = Literal["managed", "current"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ScenarioTurn(_Frozen):
    speaker: str = Field(min_length=1)
    text: str = Field(min_length=1)
    time: datetime | str | None = Field(None, description="When the turn was said (ISO date or the app's own text).")


class ScenarioQuestion(_Frozen):
    q: str = Field(min_length=1, description="The question, asked in the scenario's scope.")
    a: str = Field(min_length=1, description="The gold answer; judged by containment of its words.")


class Scenario(_Frozen):
    id: str = Field(min_length=1)
    turns: list[ScenarioTurn] = Field(min_length=1)
    questions: list[ScenarioQuestion] = Field(default_factory=list)
    keep: list[str] = Field(default_factory=list, description="Substrings that must still be current memory at the end.")
    gone: list[str] = Field(default_factory=list, description="Substrings that must no longer be current belief (see gone_tiers).")
    gone_tiers: GoneTiers | None = Field(None, description="Where a gone substring may survive: None nowhere (a forget), 'managed' in the episodic tier, 'current' as retired history.")
    max_memories_matching: dict[str, int] = Field(default_factory=dict, description="Key -> at most this many current semantic records containing it.")
    max_memories_total: int | None = Field(None, ge=0, description="At most this many current semantic records in all.")
    group: str | None = None
    scenario_class: str | None = Field(None, alias="class", description="The class reported for the scenario; None: derived from its checks.")

    @property
    def user_id(self) -> str:
        return f"u-{self.id}"


class Isolation(_Frozen):
    """Two users' turns, each in its own scope: the second user's searches and answers must
    never return the first user's memories."""

    about: str = ""
    first: str = Field("forget-request", description="The scenario whose turns the first user says.")
    first_turns: int = Field(2, ge=1, description="How many of its turns.")
    second: str = Field("injection", description="The scenario the second user says, all turns.")


class ScenarioFile(_Frozen):
    about: str = ""
    scenarios: list[Scenario] = Field(min_length=1)
    isolation: Isolation | None = None


# -- results --------------------------------------------------------------------------------


class CheckOutcome(_Frozen):
    kind: Literal["keep", "gone", "limit"]
    target: str = Field(description="The substring (or, for a limit, the key and bound).")
    tiers: str | None = Field(None, description="A gone check's gone_tiers ('all' for a forget).")
    passed: bool
    found_in: list[str] = Field(default_factory=list, description="Records that broke it (gone, limit) or held it (keep), as 'tier: text'.")
    retired: bool = Field(False, description="A keep check that failed while a record containing it exists, retired or deleted: a false retirement.")


class AnsweredQuestion(_Frozen):
    question: str
    gold: str
    prediction: str
    correct: bool
    top3: list[str] = Field(description="The first three memories retrieve() returned.")
    gold_in_top3: bool
    latency_s: float


class ScenarioOutcome(_Frozen):
    id: str
    scenario_class: str
    passed: bool
    checks: list[CheckOutcome]
    questions: list[AnsweredQuestion]
    failures: list[str] = Field(default_factory=list, description="What the ingests reported (refused ops, failed policies).")
    wall_s: float


class IsolationOutcome(_Frozen):
    passed: bool
    leaked: list[str] = Field(default_factory=list, description="The first user's memories the second user's search or answer returned.")


class ClassRow(_Frozen):
    name: str
    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None


class ScenarioFileReport(_Frozen):
    source: str
    policies: dict[str, str]
    rows: list[ClassRow]
    scenarios: list[ScenarioOutcome]
    isolation: IsolationOutcome | None = None
    wall_s: float
    run: RunInfo | None = Field(None, description="The command, commit and machine the report came from.")
    started_at: datetime | None = None
