"""What an evaluation run records: per question, per conversation, and the run's summary.

Per-conversation results are the unit of caching (one JSON file each); the summary is always
recomputed from them, so a resumed run and a fresh one report the same numbers.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from memsdk.eval.config import EvalConfig

__all__ = [
    "RunInfo", "QuestionResult", "IngestStats", "IngestProgress", "ConversationResult", "Retirement", "Scores", "CostSummary", "Abstention", "Summary",
    "RunReport", "JudgeRef", "ADVERSARIAL", "abstention", "summarize", "percentile", "conversation_path", "result_paths", "write_atomic",
]  # fmt: skip

Label = Literal["CORRECT", "WRONG"]


class QuestionResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    question: str
    gold: str
    category: int
    category_name: str
    prediction: str
    f1: float
    bleu1: float
    em: float
    judge: Label | None = Field(None, description="The judge's label; None when no judge ran or its reply named neither.")
    abstained: bool = Field(False, description="The answer said memory does not hold it (`AnswerResult.abstained`); for category 5, the right reply.")
    judge_reply: str | None = None
    recall: dict[int, float | None] = Field(default_factory=dict, description="Evidence recall@k; None when the question has no evidence ids.")
    session_recall_any: dict[int, float | None] = Field(default_factory=dict, description="1 when an evidence session is among the first k sessions retrieved.")
    session_recall_all: dict[int, float | None] = Field(default_factory=dict, description="1 when every evidence session is among the first k sessions retrieved.")
    chance: dict[str, dict[int, float | None]] = Field(
        default_factory=dict, description="Per metric ('recall', 'session_recall_any', 'session_recall_all'), its expected value with the conversation ranked at random."
    )
    latency_s: float
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class JudgeRef(BaseModel):
    """Which judge labelled a result: J from different judges is not comparable."""

    model_config = ConfigDict(frozen=True)

    url: str | None = Field(description="The judge's server; None for an in-process or injected backend.")
    model: str


class IngestStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    turns: int = 0
    latency_s: list[float] = Field(default_factory=list, description="Per turn, in order; kept whole so percentiles pool across conversations.")
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    facts: int = 0
    ops: dict[str, int] = Field(default_factory=dict, description="Ops that reached the bank, by type.")
    failures: int = Field(0, description="Parse failures and rejected ops reported by ingest.")
    fallback_turns: int = 0


class IngestProgress(BaseModel):
    """A conversation's ingest so far (LLM policies on a CPU take hours per conversation)."""

    sample_id: str
    turns_total: int
    ingest: IngestStats
    memories: int
    policy_stats: dict[str, dict[str, int]]


class Retirement(BaseModel):
    """A semantic memory the manager took out of the current view, and the one that did it:
    what a person reads to judge whether the retirement was right."""

    model_config = ConfigDict(frozen=True)

    retired: str
    by: str | None = Field(description="The successor's text; None when it is no longer listed.")


class ConversationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    sample_id: str
    fingerprint: str = Field(description="EvalConfig.fingerprint() of the run that produced it.")
    turns: int
    memories: int = Field(description="Live semantic memories (the manager's facts) of both speakers after ingest; episodic turns are not counted.")
    ingest: IngestStats
    questions: list[QuestionResult]
    policy_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
    skipped: str | None = Field(None, description="Why this conversation was not answered (full-context that does not fit).")
    retirements: list[Retirement] = Field(default_factory=list, description="Every semantic memory retired by a successor, oldest first.")
    wall_s: float
    judged_by: list[JudgeRef] = Field(default_factory=list, description="The judges whose labels its questions carry, in the order they labelled.")


class Scores(BaseModel):
    n: int
    f1: float
    bleu1: float
    em: float
    j: float | None = Field(None, description="Share judged CORRECT among judged questions.")
    judged: int = 0
    recall: dict[int, float | None] = Field(default_factory=dict, description="Mean recall@k over questions with evidence.")
    session_recall_any: dict[int, float | None] = Field(default_factory=dict, description="Mean session recall_any@k over questions with evidence.")
    session_recall_all: dict[int, float | None] = Field(default_factory=dict, description="Mean session recall_all@k over questions with evidence.")
    chance: dict[str, dict[int, float | None]] = Field(default_factory=dict, description="The same means with the conversations ranked at random.")


class CostSummary(BaseModel):
    ingest_p50_s: float | None
    ingest_p95_s: float | None
    answer_p50_s: float | None
    answer_p95_s: float | None
    llm_calls_per_turn: float
    prompt_tokens_per_turn: float
    completion_tokens_per_turn: float
    llm_calls_per_question: float
    prompt_tokens_per_question: float
    completion_tokens_per_question: float
    memories: dict[str, int] = Field(description="Live memories per conversation.")
    memories_per_turn: float
    ops: dict[str, int]
    facts: int
    parse_failures: int
    policy_calls: int
    parse_failure_rate: float | None = Field(description="Parse failures / LLM policy calls (None with no LLM calls).")


class Abstention(BaseModel):
    """Category 5 (a question about one speaker only the other's turns answer, so the right
    reply is that memory does not say): abstaining is right, answering the trap is wrong."""

    adversarial: int = Field(description="Category 5 questions asked.")
    abstained_on_adversarial: int
    abstained: int = Field(description="Abstentions over every question asked.")
    recall: float | None = Field(description="Category 5 questions abstained on, of those asked.")
    precision: float | None = Field(description="Abstentions that were on category 5 questions.")


class Summary(BaseModel):
    overall: Scores
    by_category: dict[str, Scores]
    answerable: Scores | None = Field(None, description="Categories 1-4 alone (as `overall` is without --include-adversarial); set when category 5 was asked.")
    abstention: Abstention | None = None
    cost: CostSummary
    skipped: dict[str, str] = Field(default_factory=dict)


class RunInfo(BaseModel):
    """How and where a run was made, so a results page can say it (scripts/render_results.py)."""

    command: str = Field(description="The command line, as typed: `memsdk eval ...`.")
    commit: str | None = Field(None, description="The checkout's HEAD, '+dirty' when its code has uncommitted changes; None outside a git checkout.")
    machine: str = Field(description="The OS, the CPU architecture and the number of cores.")

    @classmethod
    def here(cls) -> RunInfo:
        program = "memsdk" if os.path.basename(sys.argv[0]) in ("memsdk", "__main__.py") else os.path.basename(sys.argv[0])
        return cls(command=shlex.join([program, *sys.argv[1:]]), commit=_commit(), machine=f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores")


def _commit() -> str | None:
    here = Path(__file__).resolve().parent  # the code that ran, not the caller's folder
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        # the code's changes only: an edited page of the docs does not change what a run measures
        code = [":/memsdk", ":/training", ":/adapters", ":/pyproject.toml", ":/constraints"]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *code], cwd=here, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


class RunReport(BaseModel):
    split: str
    config: EvalConfig
    started_at: datetime
    wall_s: float
    run: RunInfo | None = Field(None, description="How and where it ran (None in reports written before it was recorded).")
    conversations: list[ConversationResult]
    summary: Summary

    @computed_field  # type: ignore[prop-decorator]
    @property
    def judged_by(self) -> list[JudgeRef]:
        """Every judge behind the report's J (one, unless labels were filled in by another)."""
        return list(dict.fromkeys(j for c in self.conversations for j in c.judged_by))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated q-th percentile (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, frac = int(pos), pos - int(pos)
    return ordered[lo] if frac == 0 else ordered[lo] + (ordered[lo + 1] - ordered[lo]) * frac


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def _means(per_question: Sequence[Mapping[int, float | None]]) -> dict[int, float | None]:
    """Per k, the mean over the questions that have a value at k (None where none has)."""
    ks = sorted({k for values in per_question for k in values})
    return {k: (_mean(known) if (known := [v for values in per_question if (v := values.get(k)) is not None]) else None) for k in ks}


def scores(questions: Sequence[QuestionResult], ks: Sequence[int]) -> Scores:
    judged = [q.judge for q in questions if q.judge is not None]
    recall: dict[int, float | None] = {}
    for k in ks:
        known = [r for q in questions if (r := q.recall.get(k)) is not None]
        recall[k] = _mean(known) if known else None
    chance_metrics = sorted({m for q in questions for m in q.chance})
    return Scores(
        n=len(questions),
        f1=_mean(q.f1 for q in questions),
        bleu1=_mean(q.bleu1 for q in questions),
        em=_mean(q.em for q in questions),
        j=sum(label == "CORRECT" for label in judged) / len(judged) if judged else None,
        judged=len(judged),
        recall=recall,
        session_recall_any=_means([q.session_recall_any for q in questions]),
        session_recall_all=_means([q.session_recall_all for q in questions]),
        chance={m: _means([q.chance.get(m, {}) for q in questions]) for m in chance_metrics},
    )


def _cost(conversations: Sequence[ConversationResult]) -> CostSummary:
    turn_latency = [s for c in conversations for s in c.ingest.latency_s]
    questions = [q for c in conversations for q in c.questions]
    turns = sum(c.ingest.turns for c in conversations)
    ops: Counter[str] = Counter()
    for c in conversations:
        ops.update(c.ingest.ops)
    stats = [s for c in conversations for s in c.policy_stats.values()]
    calls, failures = sum(s.get("calls", 0) for s in stats), sum(s.get("parse_failures", 0) for s in stats)
    per_turn = lambda total: total / turns if turns else 0.0  # noqa: E731
    per_question = lambda total: total / len(questions) if questions else 0.0  # noqa: E731
    return CostSummary(
        ingest_p50_s=percentile(turn_latency, 50),
        ingest_p95_s=percentile(turn_latency, 95),
        answer_p50_s=percentile([q.latency_s for q in questions], 50),
        answer_p95_s=percentile([q.latency_s for q in questions], 95),
        llm_calls_per_turn=per_turn(sum(c.ingest.llm_calls for c in conversations)),
        prompt_tokens_per_turn=per_turn(sum(c.ingest.prompt_tokens for c in conversations)),
        completion_tokens_per_turn=per_turn(sum(c.ingest.completion_tokens for c in conversations)),
        llm_calls_per_question=per_question(sum(q.llm_calls for q in questions)),
        prompt_tokens_per_question=per_question(sum(q.prompt_tokens for q in questions)),
        completion_tokens_per_question=per_question(sum(q.completion_tokens for q in questions)),
        memories={c.sample_id: c.memories for c in conversations},
        memories_per_turn=per_turn(sum(c.memories for c in conversations)),
        ops=dict(sorted(ops.items())),
        facts=sum(c.ingest.facts for c in conversations),
        parse_failures=failures,
        policy_calls=calls,
        parse_failure_rate=failures / calls if calls else None,
    )


#: LoCoMo's category of questions memory cannot answer (`memsdk.datasets.locomo.CATEGORIES`)
ADVERSARIAL = 5


def abstention(questions: Sequence[QuestionResult]) -> Abstention:
    adversarial = [q for q in questions if q.category == ADVERSARIAL]
    right = sum(q.abstained for q in adversarial)
    total = sum(q.abstained for q in questions)
    return Abstention(
        adversarial=len(adversarial), abstained_on_adversarial=right, abstained=total,
        recall=right / len(adversarial) if adversarial else None, precision=right / total if total else None,
    )  # fmt: skip


def summarize(conversations: Sequence[ConversationResult], ks: Sequence[int]) -> Summary:
    answered = [c for c in conversations if c.skipped is None]
    questions = [q for c in answered for q in c.questions]
    names = sorted({(q.category, q.category_name) for q in questions})
    adversarial = [q for q in questions if q.category == ADVERSARIAL]
    return Summary(
        overall=scores(questions, ks),
        by_category={name: scores([q for q in questions if q.category == cat], ks) for cat, name in names},
        answerable=scores([q for q in questions if q.category != ADVERSARIAL], ks) if adversarial else None,
        abstention=abstention(questions) if adversarial else None,
        cost=_cost(conversations),
        skipped={c.sample_id: c.skipped for c in conversations if c.skipped is not None},
    )


def write_atomic(path: Path, text: str) -> None:
    """Write-then-rename: a run killed mid-write leaves the old file or none, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def conversation_path(run_dir: Path, sample_id: str) -> Path:
    """Where a run keeps a conversation's result (its unit of caching)."""
    return run_dir / "conversations" / f"{sample_id}.json"


def result_paths(run_dir: Path) -> list[Path]:
    """A run's cached conversation results, without the progress files of ingests under way."""
    return sorted(p for p in (run_dir / "conversations").glob("*.json") if not p.name.endswith(".progress.json"))
