"""The output schema of each policy, declared once.

The same pydantic model gives the JSON schema for constrained decoding (vLLM
``response_format``) and parses the model's reply; the string and list bounds keep a
runaway generation from turning into a runaway memory.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

__all__ = ["ExtractedFacts", "ManagerOpOut", "ManagerDecision", "AnswerOut", "json_schema"]

Fact = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=400)]


MAX_FACTS = 20


class ExtractedFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(default_factory=list, max_length=MAX_FACTS)

    @model_validator(mode="before")
    @classmethod
    def _drop_repeats(cls, data: Any) -> Any:
        # A small model that loops repeats one item until the token limit; the distinct items
        # before the loop are still good facts, so keep those instead of failing the reply.
        if isinstance(data, dict) and isinstance(data.get("facts"), list):
            seen: dict[str, Any] = {}
            for item in data["facts"]:
                key = item.strip().casefold() if isinstance(item, str) else repr(item)
                seen.setdefault(key, item)
            return {**data, "facts": list(seen.values())[:MAX_FACTS]}
        return data


class ManagerOpOut(BaseModel):
    """One op as the model writes it: ``id`` is the integer alias shown in the prompt."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    # any int: a wrong alias is dropped (and counted) by the manager's guard, op by op,
    # instead of failing the whole decision at the schema
    id: int | None = None
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=400)] | None = None


class ManagerDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ops: list[ManagerOpOut] = Field(max_length=10)

    @model_validator(mode="before")
    @classmethod
    def _bare_ops(cls, data: Any) -> Any:
        # Small models often drop the wrapper: a bare op, or a bare list of ops.
        if isinstance(data, list):
            return {"ops": data}
        if isinstance(data, dict) and "op" in data and "ops" not in data:
            return {"ops": [data]}
        return data


class AnswerOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # a short list: under constrained decoding SmolLM2 otherwise enumerates 1, 2, 3, ... until
    # the token budget runs out before it writes the answer
    evidence: list[Annotated[int, Field(ge=0, le=999)]] = Field(default_factory=list, max_length=6)
    answer: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]

    @model_validator(mode="before")
    @classmethod
    def _numbers_only(cls, data: Any) -> Any:
        # Small models mix memory texts into the evidence list; the answer is still usable,
        # and the evidence that is a number still points at a shown memory.
        if isinstance(data, dict) and isinstance(data.get("evidence"), list):
            return {**data, "evidence": [e for e in data["evidence"] if isinstance(e, int) and not isinstance(e, bool)][:6]}
        return data


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, as sent for constrained decoding."""
    return model.model_json_schema()
