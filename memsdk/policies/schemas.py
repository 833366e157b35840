"""The output schema of each policy, declared once.

The same pydantic model gives the JSON schema for constrained decoding (vLLM
``response_format``) and parses the model's reply. Every string and list is bounded
(``maxLength`` / ``maxItems`` in the JSON schema), and vLLM's structured outputs enforce
the bounds while decoding: a small model that loops inside a string ("a striped collar, and
a striped collar, and ...") is made to close it, so the reply still ends as valid JSON
within the role's token budget instead of being cut inside the string and lost. The bounds
are sized so that one complete item fits each role's default ``max_tokens`` (about 4 chars
per token); unconstrained replies are held to the same bounds by the parser.

Each schema also has a ``salvage`` classmethod, the field-by-field half of the one reader
(`parsing.parse`): it keeps what a reply got right and drops or mends only what is broken,
returning a note per change. The rules, each tested on a real SmolLM2 reply
(tests/policies/test_parsing.py) and each refusing to guess beyond what it says:

- a string where a list is expected is a list of that one string (facts; a bare op or a
  bare list of ops is a decision);
- evidence that is not memory numbers is dropped, and the answer kept ("evidence": "The
  transgender stories" would otherwise cost the answer); digit strings are numbers;
- an answer under a documented alias key (`ANSWER_ALIASES`: name, response, final_answer)
  is the answer; no other key is guessed at;
- a text that loops (a 4-word phrase three times) is cut where it starts over; a text
  over its bound after that is dropped, never cut (a half memory would be stored);
- an item that does not validate (a fact that is not text, an op with an unknown kind)
  is dropped and the others kept;
- when every item of a reply is dropped, or a required field is missing, nothing is kept:
  the reply is a failure and the policy's safe default applies.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from memsdk.policies.parsing import trim_loop

__all__ = ["ExtractedFacts", "ManagerOpOut", "ManagerDecision", "WriterCallOut", "WriterCalls", "dropped_calls", "AnswerOut", "ReadMemory", "DeltaStep", "json_schema", "ANSWER_ALIASES"]

#: an atomic fact is a sentence ("Caroline adopted a dog named Buddy in May 2023"), not a paragraph
MAX_FACT_CHARS = 200
#: a turn rarely holds more facts than this; the extractor's 96 tokens would not fit more
MAX_FACTS = 8
#: one memory as the manager writes it: a merged UPDATE ("Has two dogs, Buddy and Scout") included
MAX_MEMORY_CHARS = 300
#: one op per memory shown (5) plus one ADD
MAX_OPS = 6
#: calls in one writer reply (Mem-alpha emits several per chunk); its 256 tokens fit about this many
MAX_CALLS = 6
#: a DeltaMem search's query
MAX_SEARCH_CHARS = 200
#: the writer rewrites the core summary in one call; the bank bounds a core memory itself
#: (`BankLimits.max_core_chars`), this keeps one call within the writer's token budget
MAX_WRITER_TEXT_CHARS = 600
#: the answer is at most ~6 words; the answerer keeps max_answer_words of it
MAX_ANSWER_CHARS = 100
MAX_EVIDENCE = 6
#: keys SmolLM2 was seen writing instead of "answer"; read as the answer only when "answer" is absent
ANSWER_ALIASES = ("name", "response", "final_answer")

Notes = list[str]

Fact = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_FACT_CHARS)]


def _unloop(text: str, where: str, notes: Notes) -> str:
    cut = trim_loop(text)
    if cut is None:
        return text
    notes.append(f"{where}: repeats itself, cut where it starts over")
    return cut


def _as_list(value: Any, where: str, notes: Notes) -> Any:
    if isinstance(value, (str, dict)):
        notes.append(f"{where}: one item where a list is expected, read as a list of one")
        return [value]
    return value


def _salvage_items(data: Any, field: str, marker: str, item: type[BaseModel], limit: int) -> tuple[Any, Notes]:
    """The list salvage of the manager's ops and the writer's calls: a bare item (one with
    ``marker``) or a bare list is the reply, an item that does not validate is dropped with a
    note, a looping text is cut, at most ``limit`` items are kept; every item dropped is a
    failure, not an empty reply."""
    notes: Notes = []
    if isinstance(data, list) or (isinstance(data, dict) and marker in data and field not in data):
        data = {field: data}
    if not isinstance(data, dict) or field not in data:
        return data, notes
    items = _as_list(data[field], field, notes)
    if not isinstance(items, list):
        return data, notes
    kept = []
    for i, raw in enumerate(items):
        where = f"{field}[{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("text"), str):
            raw = {**raw, "text": _unloop(raw["text"], f"{where}.text", notes)}
        try:
            kept.append(item.model_validate(raw).model_dump())
        except ValidationError as exc:
            e = exc.errors()[0]
            notes.append(f"{where}: dropped ({'.'.join(map(str, e['loc'])) or field[:-1]}: {e['msg']})")
    if items and not kept:
        return data, notes
    if len(kept) > limit:
        notes.append(f"{field}: {len(kept)} {field}, the first {limit} kept")
    return {**data, field: kept[:limit]}, notes


class ExtractedFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(default_factory=list, max_length=MAX_FACTS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if not isinstance(data, dict) or "facts" not in data:
            return data, notes
        facts = _as_list(data["facts"], "facts", notes)
        if not isinstance(facts, list):
            return data, notes
        kept: dict[str, str] = {}
        for i, fact in enumerate(facts):
            where = f"facts[{i}]"
            if not isinstance(fact, str) or not fact.strip():
                notes.append(f"{where}: not a text, dropped")
                continue
            fact = _unloop(fact.strip(), where, notes)
            if len(fact) > MAX_FACT_CHARS:
                notes.append(f"{where}: {len(fact)} characters, over {MAX_FACT_CHARS}: dropped")
            elif fact.casefold() in kept:  # a looping model repeats one item until the token limit
                notes.append(f"{where}: repeats an earlier fact, dropped")
            else:
                kept[fact.casefold()] = fact
        if facts and not kept:
            return data, notes  # nothing usable: a failure, not an empty extraction
        if len(kept) > MAX_FACTS:
            notes.append(f"facts: {len(kept)} facts, the first {MAX_FACTS} kept")
        return {**data, "facts": list(kept.values())[:MAX_FACTS]}, notes


class ManagerOpOut(BaseModel):
    """One op as the model writes it: ``id`` is the integer alias shown in the prompt."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    # any int: a wrong alias is dropped (and counted) by the manager's guard, op by op,
    # instead of failing the whole decision at the schema
    id: int | None = None
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_MEMORY_CHARS)] | None = None
    #: on an ADD: the aliases of the memories the new one replaces ("moved to Austin" replaces
    #: "lives in Boston"); they are retired, kept as history, not deleted
    replaces: list[int] = Field(default_factory=list, max_length=MAX_OPS)


class ManagerDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ops: list[ManagerOpOut] = Field(max_length=MAX_OPS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        # small models often drop the wrapper: a bare op or a bare list
        return _salvage_items(data, "ops", "op", ManagerOpOut, MAX_OPS)


class DeltaStep(BaseModel):
    """One DeltaMem reply: a search (more memories, please) or the final ops."""

    model_config = ConfigDict(extra="ignore")

    search: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SEARCH_CHARS)] | None = None
    ops: list[ManagerOpOut] | None = Field(None, max_length=MAX_OPS)

    @model_validator(mode="after")
    def _one_of(self) -> DeltaStep:
        if self.search is None and self.ops is None:
            raise ValueError('expected {"search": ...} or {"ops": [...]}')
        return self

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        if isinstance(data, dict) and "ops" not in data and isinstance(data.get("search"), str):
            return data, []
        return _salvage_items(data, "ops", "op", ManagerOpOut, MAX_OPS)


class WriterCallOut(BaseModel):
    """One Mem-alpha function call: ``fn`` names the function, ``id`` is a memory's alias.

    ``tier`` accepts every tier, episodic included: what a tier allows is the transition
    function's rule (an episodic insert by the writer is refused there, and counted as a
    call that did not execute), not the schema's."""

    model_config = ConfigDict(extra="ignore")

    fn: Literal["memory_insert", "memory_update", "memory_delete"]
    tier: Literal["core", "semantic", "episodic"] | None = None
    id: int | None = None
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_WRITER_TEXT_CHARS)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        # the prompt's response prefix ends in "memory_", and an unconstrained reply is read
        # with the prefix in front; a model that repeats the prefix writes "memory_memory_insert"
        if isinstance(data, dict) and isinstance(fn := data.get("fn"), str) and fn.startswith("memory_memory_"):
            data = {**data, "fn": fn.removeprefix("memory_")}
        return data


class WriterCalls(BaseModel):
    model_config = ConfigDict(extra="ignore")

    calls: list[WriterCallOut] = Field(max_length=MAX_CALLS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        """As `ManagerDecision.salvage`: a bare call or list is the reply, each call that does
        not validate is dropped with a note (`dropped_calls` counts them: Mem-alpha's R2 needs
        every call the model wrote, executed or not), a looping text is cut."""
        return _salvage_items(data, "calls", "fn", WriterCallOut, MAX_CALLS)


def dropped_calls(notes: Notes) -> int:
    """How many of a writer reply's calls the reader dropped (`WriterCalls.salvage`'s notes)."""
    return sum(1 for n in notes if n.startswith("calls[") and ": dropped (" in n) + sum(
        int(n.split()[1]) - MAX_CALLS for n in notes if n.startswith("calls: ") and n.endswith(f"the first {MAX_CALLS} kept")
    )


class AnswerOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # a short list: under constrained decoding SmolLM2 otherwise enumerates 1, 2, 3, ... until
    # the token budget runs out before it writes the answer
    evidence: list[Annotated[int, Field(ge=0, le=999)]] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    answer: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_ANSWER_CHARS)]

    @model_validator(mode="before")
    @classmethod
    def _cut_rambling(cls, data: Any) -> Any:
        # An unconstrained answer that rambles past the bound is cut at a word, not rejected:
        # the answerer keeps only its first max_answer_words anyway. (Memory texts are never
        # cut: a half-written memory would be stored.)
        if isinstance(data, dict) and isinstance(data.get("answer"), str) and len(answer := data["answer"].strip()) > MAX_ANSWER_CHARS:
            cut = answer.rfind(" ", 0, MAX_ANSWER_CHARS + 1)
            data = {**data, "answer": answer[: cut if cut > 0 else MAX_ANSWER_CHARS].rstrip()}
        return data

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if not isinstance(data, dict):
            return data, notes
        if "answer" not in data:
            alias = next((k for k in ANSWER_ALIASES if isinstance(data.get(k), str)), None)
            if alias is not None:
                notes.append(f"answer: read from {alias!r}, a documented alias")
                data = {**data, "answer": data[alias]}
        if isinstance(data.get("answer"), str):
            data = {**data, "answer": _unloop(data["answer"], "answer", notes)}
        if "evidence" in data:
            data = {**data, "evidence": _memory_numbers(data["evidence"], notes)}
        return data, notes


#: MemAgent's overwrite memory, as written: the budget a client asks for is at most this
#: (the bank's core memory holds 2,000 characters; `BankLimits.max_core_chars`)
MAX_READ_MEMORY_CHARS = 2000


class ReadMemory(BaseModel):
    """MemAgent's reply: the whole new memory, which replaces the old one."""

    model_config = ConfigDict(extra="ignore")

    memory: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_READ_MEMORY_CHARS)]

    @model_validator(mode="before")
    @classmethod
    def _cut_over_budget(cls, data: Any) -> Any:
        # a memory over the bound is cut at a word: the reader cuts it to the caller's budget
        # anyway, and keeping its start keeps what the rewrite put first
        if isinstance(data, dict) and isinstance(data.get("memory"), str) and len(text := data["memory"].strip()) > MAX_READ_MEMORY_CHARS:
            cut = text.rfind(" ", 0, MAX_READ_MEMORY_CHARS + 1)
            data = {**data, "memory": text[: cut if cut > 0 else MAX_READ_MEMORY_CHARS].rstrip()}
        return data

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if isinstance(data, dict) and isinstance(data.get("memory"), str):
            data = {**data, "memory": _unloop(data["memory"], "memory", notes)}
        return data, notes


def _memory_numbers(value: Any, notes: Notes) -> list[int]:
    """Evidence as the memory numbers shown: ints and digit strings are kept, anything else dropped."""
    items = value if isinstance(value, list) else [value]
    kept = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item)
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 999:
            kept.append(item)
    if len(kept) < len(items):
        notes.append(f"evidence: {len(items) - len(kept)} of {len(items)} items are not memory numbers, dropped")
    if not isinstance(value, list) and kept:
        notes.append("evidence: one number where a list is expected, read as a list of one")
    if len(kept) > MAX_EVIDENCE:
        notes.append(f"evidence: {len(kept)} numbers, the first {MAX_EVIDENCE} kept")
    return kept[:MAX_EVIDENCE]


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, as sent for constrained decoding."""
    return model.model_json_schema()
