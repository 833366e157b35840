"""What a management-benchmark run records: its settings, per scenario, and the summary."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from memsdk.eval.manage.scenarios.models import EventClass, Fact, ScenarioSplit
from memsdk.eval.results import CostSummary, IngestStats, QuestionResult, RunInfo

__all__ = ["ManageConfig", "RecordView", "FactOutcome", "QuestionOutcome", "Check", "ScenarioResult", "Rate", "ManageSummary", "ManageReport"]

Preset = Literal["heuristic", "llm", "auto"]


class ManageConfig(BaseModel):
    """The settings of one run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: Preset = Field("heuristic", description="The client's policy preset (extractor and manager, and the answerer unless `answerer` says otherwise).")
    manager: str | None = Field(None, min_length=1, description="The manager role's choice over the preset's ('heuristic', 'llm', or a trained policy's name the client knows); None: the preset's.")
    answerer: Literal["extractive", "llm"] | None = Field(None, description="Who answers; None: the preset's own (heuristic: extractive; llm / auto: the LLM).")
    answerer_version: str | None = Field(None, min_length=1, description="The LLM answerer's version; None: the packaged adapter for the model if there is one, else base.")
    manager_version: str | None = Field(None, min_length=1, description="The manager's version in `checkpoint_dir`: an LLM manager's adapter, or a pair head for the pair manager; None: base (the shipped head for the pair manager).")
    checkpoint_dir: str | None = Field(None, min_length=1, description="Published checkpoints the versions are found in, beside the packaged ones.")
    embedder: Literal["minilm", "hash"] = "minilm"
    model: str = "smollm2"
    llm_base_url: str | None = Field(None, description="An OpenAI-compatible server for the LLM roles; None: SmolLM2 in-process.")
    llm_threads: int = Field(1, ge=1)
    seed: int = 0
    scenarios: int | None = Field(None, ge=1, description="Scenarios generated for the split; None: its default size.")
    max_scenarios: int | None = Field(None, ge=1, description="Only the first N of them.")


class RecordView(BaseModel):
    """A record as the run found it after ingest (deleted ones included), for debugging."""

    model_config = ConfigDict(frozen=True)

    owner: str
    tier: str
    text: str
    current: bool
    deleted: bool
    source_turn_ids: tuple[str, ...] = ()


class FactOutcome(BaseModel):
    """How a gold fact ended in its owner's scope."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    in_current: bool = Field(description="A current record (live, not superseded) of the owner's scope states it.")
    in_live: bool = Field(description="A live record of any tier of the owner's scope states it (current or history).")
    stale: bool = Field(description="A current record that came from a turn asserting it (or from no known turn) states it.")
    semantic_live: int = Field(description="Live semantic records stating it.")
    passed: bool = Field(description="current: in_current; superseded: not stale; forgotten: not in_live.")


class QuestionOutcome(QuestionResult):
    """A question's answer as LoCoMo's harness scores it (category_name: current-state /
    previous-state), and whether it is right here: the gold in it, no excluded value."""

    kind: Literal["current", "previous"]
    event: EventClass
    correct: bool = Field(description="The normalised gold occurs in the normalised prediction, and no excluded value does.")


class Check(BaseModel):
    """A pass / fail about a turn rather than a value: an injection, a chit-chat turn."""

    model_config = ConfigDict(frozen=True)

    event: EventClass
    turn_id: str
    passed: bool
    detail: str = ""


class ScenarioResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    events: list[str]
    turns: int
    ingest: IngestStats
    facts: list[FactOutcome]
    questions: list[QuestionOutcome]
    checks: list[Check]
    history: dict[str, int] = Field(default_factory=dict, description="Audit events of both scopes, by type.")
    memories: int = Field(0, description="Live semantic records of both scopes after ingest.")
    records: list[RecordView] = Field(default_factory=list)
    policy_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
    wall_s: float


class Rate(BaseModel):
    """k of n, with the issue's target where it sets one."""

    metric: str
    event: str = Field(description="The event class, or 'all'.")
    k: int
    n: int
    target: float | None = None
    lower_is_better: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def meets_target(self) -> bool | None:
        if self.target is None or self.rate is None:
            return None
        return self.rate <= self.target if self.lower_is_better else self.rate >= self.target


class ManageSummary(BaseModel):
    rates: list[Rate]
    false_deletions: int = Field(description="Values gold says are current that no live record of their owner holds anymore (must be 0).")
    cost: CostSummary = Field(description="As `memsdk eval locomo` reports it.")


class ManageReport(BaseModel):
    split: ScenarioSplit
    config: ManageConfig
    policies: dict[str, str] = Field(description="What served each role: heuristic, or llm at a version.")
    started_at: datetime
    wall_s: float
    run: RunInfo | None = Field(None, description="How and where it ran (None in reports written before it was recorded).")
    scenarios: list[ScenarioResult]
    summary: ManageSummary
