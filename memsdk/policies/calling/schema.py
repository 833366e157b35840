"""What every policy's output schema shares: the salvage helpers, and the schema as sent.

Each role declares its schema once, beside its policy (`ExtractedFacts` in `extractor`,
`ManagerDecision` in `manager`, ...).

The same pydantic model gives the JSON schema for constrained decoding (vLLM
``response_format``) and parses the model's reply. Every string and list is bounded
(``maxLength`` / ``maxItems`` in the JSON schema), and vLLM's structured outputs enforce
the bounds while decoding: a small model that loops inside a string ("a striped collar, and
a striped collar, and ...") is made to close it, so the reply still ends as valid JSON
within the role's token budget instead of being cut inside the string and lost. The bounds
are sized so that one complete item fits each role's default ``max_tokens`` (about 4 chars
per token); unconstrained replies are held to the same bounds by the parser.

Each schema also has a ``salvage`` classmethod, the field-by-field half of the one reader
(`memsdk.policies.calling.parsing.parse`): it keeps what a reply got right and drops or mends only what is broken,
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

from typing import Any

from pydantic import BaseModel, ValidationError

from memsdk.policies.calling.parsing import trim_loop

__all__ = ["Notes", "unloop", "as_list", "salvage_items", "json_schema"]

Notes = list[str]


def unloop(text: str, where: str, notes: Notes) -> str:
    cut = trim_loop(text)
    if cut is None:
        return text
    notes.append(f"{where}: repeats itself, cut where it starts over")
    return cut


def as_list(value: Any, where: str, notes: Notes) -> Any:
    if isinstance(value, (str, dict)):
        notes.append(f"{where}: one item where a list is expected, read as a list of one")
        return [value]
    return value


def salvage_items(data: Any, field: str, marker: str, item: type[BaseModel], limit: int) -> tuple[Any, Notes]:
    """The list salvage of the manager's ops and the writer's calls: a bare item (one with
    ``marker``) or a bare list is the reply, an item that does not validate is dropped with a
    note, a looping text is cut, at most ``limit`` items are kept; every item dropped is a
    failure, not an empty reply."""
    notes: Notes = []
    if isinstance(data, list) or (isinstance(data, dict) and marker in data and field not in data):
        data = {field: data}
    if not isinstance(data, dict) or field not in data:
        return data, notes
    items = as_list(data[field], field, notes)
    if not isinstance(items, list):
        return data, notes
    kept = []
    for i, raw in enumerate(items):
        where = f"{field}[{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("text"), str):
            raw = {**raw, "text": unloop(raw["text"], f"{where}.text", notes)}
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


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, as sent for constrained decoding."""
    return model.model_json_schema()
