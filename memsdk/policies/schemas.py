"""The output schema of each policy, declared once.

The same pydantic model gives the JSON schema for constrained decoding (vLLM
``response_format``) and parses the model's reply. Every string and list is bounded
(``maxLength`` / ``maxItems`` in the JSON schema), and vLLM's structured outputs enforce
the bounds while decoding: a small model that loops inside a string ("a striped collar, and
a striped collar, and ...") is made to close it, so the reply still ends as valid JSON
within the role's token budget instead of being cut inside the string and lost. The bounds
are sized so that one complete item fits each role's default ``max_tokens`` (about 4 chars
per token); unconstrained replies are held to the same bounds by the parser.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

__all__ = ["ExtractedFacts", "ManagerOpOut", "ManagerDecision", "AnswerOut", "json_schema"]

#: an atomic fact is a sentence ("Caroline adopted a dog named Buddy in May 2023"), not a paragraph
MAX_FACT_CHARS = 200
#: a turn rarely holds more facts than this; the extractor's 96 tokens would not fit more
MAX_FACTS = 8
#: one memory as the manager writes it: a merged UPDATE ("Has two dogs, Buddy and Scout") included
MAX_MEMORY_CHARS = 300
#: one op per memory shown (5) plus one ADD
MAX_OPS = 6
#: the answer is at most ~6 words; the answerer keeps max_answer_words of it
MAX_ANSWER_CHARS = 100
MAX_EVIDENCE = 6

Fact = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_FACT_CHARS)]


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
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_MEMORY_CHARS)] | None = None


class ManagerDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ops: list[ManagerOpOut] = Field(max_length=MAX_OPS)

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
    evidence: list[Annotated[int, Field(ge=0, le=999)]] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    answer: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_ANSWER_CHARS)]

    @model_validator(mode="before")
    @classmethod
    def _numbers_only(cls, data: Any) -> Any:
        # Small models mix memory texts into the evidence list; the answer is still usable,
        # and the evidence that is a number still points at a shown memory.
        if isinstance(data, dict) and isinstance(data.get("evidence"), list):
            data = {**data, "evidence": [e for e in data["evidence"] if isinstance(e, int) and not isinstance(e, bool)][:MAX_EVIDENCE]}
        # An unconstrained answer that rambles past the bound is cut at a word, not rejected:
        # the answerer keeps only its first max_answer_words anyway. (Memory texts are never
        # cut: a half-written memory would be stored.)
        if isinstance(data, dict) and isinstance(data.get("answer"), str) and len(answer := data["answer"].strip()) > MAX_ANSWER_CHARS:
            cut = answer.rfind(" ", 0, MAX_ANSWER_CHARS + 1)
            data = {**data, "answer": answer[: cut if cut > 0 else MAX_ANSWER_CHARS].rstrip()}
        return data


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, as sent for constrained decoding."""
    return model.model_json_schema()
