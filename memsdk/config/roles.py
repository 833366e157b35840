"""What serves each role: the per-role policy specification the client, the config, the
environment and the CLI all accept.

    policies="auto"  (the default)                      the measured defaults for the model (`MEASURED_DEFAULTS`):
                                                        over SmolLM2 heuristic extractor, the trained pair
                                                        manager (no LLM), LLM answerer;
                                                        over any other model (or an injected backend) "llm"
    policies="llm"                                      every role an LLM on the client's backend
    policies="heuristic"                                every role without an LLM
    policies={"extractor": "heuristic",                 per role (unnamed roles: "llm")
              "manager": {"base_url": "http://big:8000", "model": "qwen-7b"},
              "answerer": LLMSpec(in_process=True),
              }
    policies={"manager": NoCardNumbers()}               a policy object (`memsdk.policies.plugged`)
    policies={"manager": "no-card-numbers"}             a policy installed under the ``memsdk.policies`` entry points

A role's choice is one of: ``"heuristic"``, ``"llm"`` (an `LLMSpec` with every field at its
default), an `LLMSpec` (or its dict), the name of an installed policy, or an object that
implements the role's protocol. Strings from the environment or the CLI may also be the
JSON of an `LLMSpec`. Validation names the field: ``policies.manager.base_url``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from memsdk.llm.base import SamplingParams
from memsdk.llm.models import model_key

__all__ = ["POLICY_ROLES", "MEASURED_DEFAULTS", "LLMSpec", "RolePolicies", "role_choice", "label"]

#: the roles a client serves, in pipeline order
POLICY_ROLES = ("extractor", "manager", "answerer")

#: what ``policies="auto"`` (the default) serves per base model (`model_key`), chosen by
#: measurement on LoCoMo validation (README, *Defaults, measured*): over SmolLM2-135M the
#: heuristic extractor and manager keep the recall of its LLM ones (tiers + hybrid: @10 .722
#: against .685, @60 .824 against .827) at no LLM call instead of 2.26 per turn, and the
#: answerer is the LLM one, which then serves the adapter the package ships for it (F1 .357
#: against .074 base and .018 extractive on the gate's states). The manager is the trained
#: pair manager (no LLM), each version through the release gate against the one before it;
#: the serving one passed a gate pooled over the generator's val scenarios, pairs written
#: outside the team and LoCoMo val recall (its ``gate.json``; docs/training.md). Any other
#: model: every role an LLM policy.
MEASURED_DEFAULTS: dict[str, dict[str, str]] = {"smollm2": {"extractor": "heuristic", "manager": "pairs", "answerer": "llm"}}
SHORTHANDS = ("llm", "heuristic")


class LLMSpec(BaseModel):
    """An LLM serves the role. Every field left unset means what the client is configured with.

    ``base_url`` an OpenAI-compatible server (vLLM) for this role alone; ``in_process``
    the model in this process (transformers) even when the client has a server; ``model``
    the served model, a LoRA name on that server, or in-process a model folder; ``version``
    the registry version to serve at start (a published checkpoint; hot-swapped later like
    any other); ``prompt`` a prompt id such as ``manager/v2``; ``sampling`` the role's
    sampling; ``fallback`` whether the role degrades to its heuristic while its backend is
    down (default: the client's ``fallback_to_heuristic``); ``policy`` a request/read policy
    (`memsdk.policies.plugged.PromptPolicy`) or an installed policy's name, served on this
    LLM instead of the built-in prompt; ``backend`` an LLM backend object to use (it stays
    the caller's: the client never closes it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    base_url: str | None = None
    in_process: bool = False
    model: str | None = Field(None, min_length=1)
    api_key: str | None = None
    timeout_s: float | None = Field(None, gt=0)
    version: str | None = Field(None, min_length=1)
    prompt: str | None = Field(None, min_length=1)
    sampling: SamplingParams | None = None
    fallback: bool | None = None
    policy: Any = None
    backend: Any = None

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_place(self) -> LLMSpec:
        if sum(x for x in (self.base_url is not None, self.in_process, self.backend is not None)) > 1:
            raise ValueError("give at most one of base_url, in_process and backend: they say where the model runs")
        return self

    @property
    def overrides_endpoint(self) -> bool:
        """Whether the role needs a backend of its own (else the client's default serves it)."""
        return self.base_url is not None or self.in_process or self.model is not None or self.api_key is not None or self.timeout_s is not None


def role_choice(value: Any, role: str) -> Any:
    """Normalise one role's choice: a shorthand string, an installed policy's name, an
    `LLMSpec` (from a dict or JSON text), or a policy object for ``role``. Raises ValueError
    (which pydantic reports with the field's path) for anything else."""
    from memsdk.policies.plugged import check_policy_object

    if isinstance(value, LLMSpec):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):  # JSON from the environment or the CLI
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        elif text in SHORTHANDS or _is_name(text):
            return text
        else:
            raise ValueError(f"expected 'llm', 'heuristic', an installed policy's name or an LLM spec, got {value!r}")
    if isinstance(value, dict):
        return LLMSpec.model_validate(value)
    if value is None or isinstance(value, (bool, int, float, list, tuple, bytes)):
        raise ValueError(f"expected 'llm', 'heuristic', an installed policy's name, an LLM spec or a policy object, got {type(value).__name__}")
    check_policy_object(value, role)
    return value


def _is_name(text: str) -> bool:
    return 0 < len(text) <= 100 and all(c.isalnum() or c in "-_." for c in text)


class RolePolicies(BaseModel):
    """One choice per role; roles not named are ``"llm"``."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    extractor: Any = "llm"
    manager: Any = "llm"
    answerer: Any = "llm"
    #: Mem-alpha's writer, used when ``ClientConfig(writer=True)``: an LLM only (there is no
    #: heuristic writer), so ``"llm"`` or an `LLMSpec` without a policy object
    writer: Any = "llm"
    #: MemAgent's reader (`MemoryClient.read`): ``"llm"``, ``"heuristic"`` (a window of the
    #: most recent text) or an `LLMSpec` without a policy object
    reader: Any = "llm"

    @field_validator(*POLICY_ROLES, mode="before")
    @classmethod
    def _choice(cls, value: Any, info: ValidationInfo) -> Any:
        return role_choice(value, info.field_name or "")

    @field_validator("writer", "reader", mode="before")
    @classmethod
    def _built_in_only(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and value.strip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        if isinstance(value, dict):
            value = LLMSpec.model_validate(value)
        allowed = ("llm", "heuristic") if info.field_name == "reader" else ("llm",)
        if value in allowed or (isinstance(value, LLMSpec) and value.policy is None):
            return value
        raise ValueError(f"expected {' or '.join(map(repr, allowed))} or an LLM spec (base_url, in_process, model, ...) without a policy object")

    @classmethod
    def of(cls, policies: Literal["auto", "llm", "heuristic"] | RolePolicies, model: str | None = None) -> RolePolicies:
        """The per-role form of a shorthand. ``"auto"``: the measured defaults for ``model``
        (`MEASURED_DEFAULTS`), or ``"llm"`` for every role over any other model and where the
        model is not known (None: a backend the caller injected)."""
        if isinstance(policies, RolePolicies):
            return policies
        if policies == "auto":
            return cls(**MEASURED_DEFAULTS.get(model_key(model), {})) if model is not None else cls()
        return cls(**{role: policies for role in POLICY_ROLES}, writer="llm", reader=policies)

    def __getitem__(self, role: str) -> Any:
        return getattr(self, role)

    def uses_llm(self) -> bool:
        return any(self[r] != "heuristic" for r in POLICY_ROLES)


def label(choice: Any) -> str:
    """How a choice reads in logs and in ``memsdk policies``."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, LLMSpec):
        where = choice.base_url or ("in-process" if choice.in_process else "the client's backend")
        return f"llm ({choice.model or 'default model'} on {where})"
    return f"{type(choice).__module__}.{type(choice).__qualname__}"
