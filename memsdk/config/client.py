"""Client configuration: one typed object, defaults for the embedded setup, env overrides.

    ClientConfig()                                   embedded: ~/.local/share/memsdk, SmolLM2 in-process
    ClientConfig(qdrant_url="http://qdrant:6333",    production: a Qdrant server and a vLLM server
                 llm_base_url="http://vllm:8000", model="smollm2")
    ClientConfig.from_env()                          MEMSDK_DATA_DIR, MEMSDK_QDRANT_URL, MEMSDK_LLM_BASE_URL, ...
    ClientConfig(policies={"extractor": "heuristic",  per role: see memsdk.config.roles
                           "manager": {"base_url": "http://vllm-7b:8000"}})
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memsdk.bank.transition import BankLimits
from memsdk.config.roles import POLICY_ROLES, RolePolicies

__all__ = ["ClientConfig", "default_data_dir"]


def default_data_dir() -> Path:
    if env := os.environ.get("MEMSDK_DATA_DIR"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "memsdk"


class ClientConfig(BaseModel):
    """Everything a client is configured by, validated once (a client turns a bad field into
    `InvalidInput` naming it). ``MemoryClient(**fields)`` builds one; `from_env` reads ``MEMSDK_*``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir, description="Embedded store, interaction log and client state.")
    qdrant_url: str | None = Field(None, description="A Qdrant server; None means the embedded engine under data_dir.")
    qdrant_api_key: str | None = None
    llm_base_url: str | None = Field(None, description="An OpenAI-compatible server (vLLM); None means SmolLM2 in-process.")
    llm_api_key: str | None = None
    model: str = Field("smollm2", description="Served base model name.")
    policies: Literal["auto", "llm", "heuristic"] | RolePolicies = Field(
        "auto",
        description="What serves each role: 'auto' (the measured defaults for the model: over SmolLM2 the heuristic extractor "
        "and manager and the LLM answerer, over any other model or an injected backend 'llm'), 'llm' (every role on the LLM "
        "backend), 'heuristic' (no LLM), or per role "
        "{'extractor': ..., 'manager': ..., 'answerer': ...} with 'llm', 'heuristic', an LLMSpec, an installed policy's name "
        "or a policy object (memsdk.config.roles).",
    )
    fallback_to_heuristic: bool = Field(True, description="Use the heuristic policies while the LLM backend is down.")
    announce: bool = Field(True, description="Say on stderr, once per process, what each role serves and why (`client.policies` says it too).")
    checkpoint_dir: Path | None = Field(None, description="Published policy checkpoints; default data_dir/checkpoints.")
    packaged_adapters: bool = Field(
        True,
        description="Serve the LoRA adapters shipped inside the package (memsdk/registry/packaged) for a role that runs the "
        "built-in LLM policy over the model they were trained on, unless a version is pinned or was chosen before; "
        "they are listed and gated like published versions either way only when True.",
    )
    related_k: int = Field(5, ge=1, le=50, description="Related memories shown to the manager per fact.")
    answer_k: int = Field(
        60,
        ge=1,
        le=200,
        description="Memories shown to the answerer, split evenly across scopes. Not set: the k the serving answerer version's "
        "manifest serves it at (measured, else its training k; the packaged SmolLM2 adapter: 20), else 60.",
    )
    max_turn_chars: int = Field(
        BankLimits().max_text_chars,
        ge=1,
        description="Longer turns are refused whole before anything is stored (InvalidInput naming turn.text). With tiers a turn is kept "
        "verbatim as one episodic memory, so at most the bank's max_text_chars; the extractor sees the first 1,500.",
    )
    context_turns: int = Field(2, ge=0, le=20)
    hybrid: bool = Field(True, description="Answer retrieval fuses dense (MiniLM) and BM25 rankings inside Qdrant; False: dense only.")
    tiers: bool = Field(True, description="Keep every turn verbatim in the episodic tier and answer from core + semantic + episodic; False: semantic facts only (the single-tier design, for comparison).")
    writer: bool = Field(False, description="Ingest with Mem-alpha's writer (one call per turn: several memory_insert / memory_update / memory_delete calls over the core and semantic tiers) instead of extractor + manager; needs LLM policies and tiers.")
    log_interactions: bool = Field(True, description="Record every ingest and answer for training.")
    embedder_threads: int = Field(1, ge=1)
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_concurrency: int = Field(8, ge=1, le=1024, description="Requests one LLM server backend has in flight at once; more wait their turn. vLLM batches the requests in flight, so many concurrent scopes want more.")
    llm_breaker_failures: int | None = Field(5, ge=1, description="After this many requests in a row find an LLM server unreachable, fail at once (so the role's fallback decides) for llm_breaker_cooldown_s; None: never.")
    llm_breaker_cooldown_s: float = Field(30.0, gt=0)

    @field_validator("policies", mode="before")
    @classmethod
    def _per_role(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().startswith("{"):  # JSON from the environment
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        if isinstance(value, dict):
            return RolePolicies.model_validate(value)
        if isinstance(value, str) and value not in ("auto", "llm", "heuristic"):
            raise ValueError(f"expected 'auto', 'llm', 'heuristic' or a mapping of role to policy (JSON in the environment), got {value!r}")
        return value

    @model_validator(mode="after")
    def _writer_needs_llm_and_tiers(self) -> Self:
        if self.writer and (self.policies == "heuristic" or not self.tiers):
            raise ValueError("writer=True needs policies='llm' and tiers=True (the writer is an LLM policy over the tiers)")
        return self

    @property
    def checkpoints(self) -> Path:
        """Where published policy versions are looked up: ``checkpoint_dir``, else
        ``<data_dir>/checkpoints``."""
        return self.checkpoint_dir or self.data_dir / "checkpoints"

    @classmethod
    def from_env(cls, **overrides: object) -> ClientConfig:
        env: dict[str, Any] = {  # Any: `policies` may become a dict below
            "data_dir": os.environ.get("MEMSDK_DATA_DIR"),
            "qdrant_url": os.environ.get("MEMSDK_QDRANT_URL"),
            "qdrant_api_key": os.environ.get("MEMSDK_QDRANT_API_KEY"),
            "llm_base_url": os.environ.get("MEMSDK_LLM_BASE_URL"),
            "llm_api_key": os.environ.get("MEMSDK_LLM_API_KEY"),
            "model": os.environ.get("MEMSDK_MODEL"),
            "policies": os.environ.get("MEMSDK_POLICIES"),
            "llm_max_concurrency": os.environ.get("MEMSDK_LLM_MAX_CONCURRENCY"),  # a number: validated as one
        }
        env = {k: v for k, v in env.items() if v}
        # MEMSDK_POLICY_<ROLE> names one role's policy ("heuristic", an installed policy's
        # name, or an LLM spec's JSON) on top of MEMSDK_POLICIES
        per_role = {role: v for role in POLICY_ROLES if (v := os.environ.get(f"MEMSDK_POLICY_{role.upper()}"))}
        if per_role and "policies" not in overrides:
            base = env.get("policies", "llm")
            if isinstance(base, str) and base.strip().startswith("{"):
                base = json.loads(base)
            env["policies"] = {**({r: base for r in POLICY_ROLES} if isinstance(base, str) else base), **per_role}
        return cls.model_validate({**env, **overrides})
