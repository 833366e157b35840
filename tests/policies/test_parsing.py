"""Parsing with one repair: what is accepted, what is repaired, what fails."""

from __future__ import annotations

import pytest

from memsdk.policies.calling.parsing import close_truncated, find_json_object, parse
from memsdk.policies.answerer import MAX_ANSWER_CHARS, AnswerOut
from memsdk.policies.calling.schema import json_schema
from memsdk.policies.extractor import MAX_FACT_CHARS, MAX_FACTS, ExtractedFacts
from memsdk.policies.manager import ManagerDecision


def test_clean_json_parses_without_repair() -> None:
    p = parse('{"facts": ["Caroline went hiking"]}', ExtractedFacts)
    assert p.ok and not p.repaired and p.value.facts == ["Caroline went hiking"]


def test_json_inside_prose_and_fences_is_repaired() -> None:
    raw = 'Sure! Here you go:\n```json\n{"facts": ["Mel paints", "Mel runs"]}\n```\nHope that helps {not json}'
    p = parse(raw, ExtractedFacts)
    assert p.ok and p.repaired and p.value.facts == ["Mel paints", "Mel runs"]


def test_braces_inside_strings_do_not_confuse_the_scanner() -> None:
    assert find_json_object('x {"a": "}{", "b": "\\"}"} y') == '{"a": "}{", "b": "\\"}"}'


def test_truncated_output_keeps_only_complete_elements() -> None:
    raw = '{"ops": [{"op": "ADD", "text": "Likes jazz"}, {"op": "UPDATE", "id": 0, "text": "Has two do'
    p = parse(raw, ManagerDecision)
    assert p.ok and p.repaired
    assert [(o.op, o.text) for o in p.value.ops] == [("ADD", "Likes jazz")]  # the half-written UPDATE is dropped


def test_truncation_inside_the_first_element_is_a_failure_not_a_guess() -> None:
    assert close_truncated('{"facts": ["Caroline went to') is None
    assert not parse('{"facts": ["Caroline went to', ExtractedFacts).ok


@pytest.mark.parametrize("raw", ["I think she likes dogs.", "", "null", "[1, 2]", '{"answer": 5}', '{"evidence": [1]}'])
def test_prose_and_wrong_shapes_fail_with_a_reason(raw: str) -> None:
    p = parse(raw, AnswerOut)
    assert not p.ok and p.error


def test_schema_bounds_runaway_output() -> None:
    facts = ", ".join(f'"fact {i}"' for i in range(50))
    assert parse('{"facts": [' + facts + "]}", ExtractedFacts).value.facts == [f"fact {i}" for i in range(MAX_FACTS)]
    looped = '{"facts": ["Mel paints", "The group", "The group", "the group ", "The group"]}'
    assert parse(looped, ExtractedFacts).value.facts == ["Mel paints", "The group"]
    assert not parse('{"answer": "' + "word " * 20_000 + '"}', AnswerOut).ok  # 100 KB: over the parse limit
    assert not parse('{"facts": ["' + "x" * (MAX_FACT_CHARS + 1) + '"]}', ExtractedFacts).ok  # a memory is never cut


def _unbounded(node: object, path: str = "$") -> list[str]:
    """Every string without maxLength and every array without maxItems in a JSON schema."""
    out = []
    if isinstance(node, dict):
        if node.get("type") == "string" and "maxLength" not in node and "enum" not in node:
            out.append(path)
        if node.get("type") == "array" and "maxItems" not in node:
            out.append(path)
        for key, child in node.items():
            out += _unbounded(child, f"{path}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out += _unbounded(child, f"{path}[{i}]")
    return out


@pytest.mark.parametrize("schema", [ExtractedFacts, ManagerDecision, AnswerOut])
def test_every_string_and_list_a_policy_may_write_is_bounded(schema) -> None:
    # vLLM's structured outputs enforce maxLength / maxItems while decoding: an unbounded field
    # is where a looping small model runs until max_tokens and the reply is lost
    assert _unbounded(json_schema(schema)) == []


def test_a_rambling_answer_is_cut_at_a_word_not_rejected() -> None:
    # the answerer keeps ~6 words of it anyway, so cutting loses nothing a user would see
    long = " ".join(["Caroline"] + ["really"] * 40 + ["paints"])
    out = parse('{"answer": "' + long + '", "evidence": [1]}', AnswerOut).value
    assert out is not None and len(out.answer) <= MAX_ANSWER_CHARS and long.startswith(out.answer)
    assert long[len(out.answer)] == " " and out.evidence == [1]  # whole words only
    one_word = parse('{"answer": "' + "x" * 500 + '"}', AnswerOut).value
    assert one_word is not None and one_word.answer == "x" * MAX_ANSWER_CHARS


def test_bare_ops_are_accepted_as_a_decision() -> None:
    assert parse('{"op": "NOOP"}', ManagerDecision).value.ops[0].op == "NOOP"
    assert len(parse('[{"op": "ADD", "text": "x"}, {"op": "NOOP"}]', ManagerDecision).value.ops) == 2


# -- field by field: each salvage rule on a real SmolLM2 reply (the reliability and parsing issues) --
def test_an_answer_with_malformed_evidence_is_an_answer_without_evidence() -> None:
    for raw, answer in [
        ('{"answer": "The transgender stories", "evidence": "The transgender stories"}', "The transgender stories"),
        ('{"answer": "Melanie paints a picture of a dog.", "evidence": "Adopted another dog, Buddy"}', "Melanie paints a picture of a dog."),
    ]:
        p = parse(raw, AnswerOut)
        assert p.ok and p.value.answer == answer and p.value.evidence == []
        assert p.notes == ("evidence: 1 of 1 items are not memory numbers, dropped",)
    p = parse('{"answer": "Buddy", "evidence": [2, "3", "Buddy", true]}', AnswerOut)
    assert p.value.evidence == [2, 3] and len(p.notes) == 1  # digit strings are numbers; text and bools are not


def test_an_answer_under_a_documented_alias_is_read_and_no_other_key_is_guessed() -> None:
    p = parse('{"name": "Caroline\'s dog", "evidence": [1]}', AnswerOut)
    assert p.ok and p.value.answer == "Caroline's dog" and p.notes == ("answer: read from 'name', a documented alias",)
    assert parse('{"final_answer": "Buddy"}', AnswerOut).value.answer == "Buddy"
    assert not parse('{"dog_name": "Buddy", "evidence": [1]}', AnswerOut).ok  # not on the list: a failure, not a guess
    assert parse('{"answer": "Buddy", "name": "Scout"}', AnswerOut).value.answer == "Buddy"  # the real key wins


def test_an_answer_cut_inside_its_own_loop_keeps_what_came_before_the_repeat() -> None:
    p = parse('{"answer": "2022-01-01 12:32:53.188.12.188.12.188.12.188.12.188.12.1', AnswerOut)
    assert p.ok and p.repaired and p.value.answer == "2022-01-01 12:32:53.188.12."
    assert p.notes[0].startswith("cut by the token limit inside a string that repeats itself")
    # a loop inside one "word" (digits are a token each): vLLM json_schema, conv-30 validation
    digits = parse('{"answer": "2022-01-01 12:00:00.0000000000000.0000000000000.000000000000', AnswerOut)
    assert digits.ok and digits.value.answer == "2022-01-01 12:00:00.0"
    # a closed string is not cut for repeated characters: "1000000" is a number, not a loop
    assert parse('{"answer": "1000000000 dollars"}', AnswerOut).value.answer == "1000000000 dollars"
    assert not parse('{"answer": "It cost 100000000', AnswerOut).ok  # open, no loop: never guessed


def test_an_extractor_reply_keeps_every_complete_fact_and_cuts_a_looping_one() -> None:
    cut = parse('{"facts": ["I\'m a mom to a baby girl. I\'m a mom to a baby girl. I\'m a mom to a baby girl. I\'m a mo', ExtractedFacts)
    assert cut.ok and cut.value.facts == ["I'm a mom to a baby girl."]
    both = parse('{"facts": ["Caroline went hiking", "Melanie paints. Melanie paints. Melanie paints. Melanie paints. Mel', ExtractedFacts)
    assert both.value.facts == ["Caroline went hiking", "Melanie paints."]
    # closed by a schema bound while looping (constrained decoding): the same cut, with a note
    closed = parse('{"facts": ["has a striped collar, and a striped collar, and a striped collar, and a striped collar"]}', ExtractedFacts)
    assert closed.value.facts == ["has a striped collar"] and closed.notes == ("facts[0]: repeats itself, cut where it starts over",)
    assert parse('{"facts": "Caroline adopted a dog named Buddy"}', ExtractedFacts).value.facts == ["Caroline adopted a dog named Buddy"]


def test_a_manager_reply_keeps_the_ops_that_validate_and_cuts_a_looping_text() -> None:
    looping = (
        '{"ops": [{"op": "UPDATE", "id": 1, "text": "Nate has a turtle, Lucy has a dog, and Nate has a turtle, Lucy has a dog, '
        'and Nate has a turtle, Lucy has a dog, and Nate has a turtle, Lucy has"}, {"op": "DELETE", "id": 2, "text": "Nate has a turtle'
    )
    p = parse(looping, ManagerDecision)
    assert p.ok and [(o.op, o.id, o.text) for o in p.value.ops] == [("UPDATE", 1, "Nate has a turtle, Lucy has a dog")]
    mixed = parse('{"ops": [{"op": "MATHEMATICALS", "type": "MathProblem"}, {"op": "ADD", "text": "Likes maths"}]}', ManagerDecision)
    assert [(o.op, o.text) for o in mixed.value.ops] == [("ADD", "Likes maths")] and mixed.notes[0].startswith("ops[0]: dropped (op:")


@pytest.mark.parametrize(
    "raw,schema",
    [
        ('{"facts": [1, 2, null]}', ExtractedFacts),
        ('{"facts": ["' + "x" * 500 + '"]}', ExtractedFacts),
        ('{"ops": [{"op": "MATHEMATICALS"}]}', ManagerDecision),
        ('{"evidence": [1, 2]}', AnswerOut),
        ('{"answer": ["Buddy"]}', AnswerOut),
    ],
)
def test_a_reply_with_no_usable_field_is_still_a_failure(raw: str, schema) -> None:
    p = parse(raw, schema)
    assert not p.ok and p.error and p.notes == ()


def test_a_clean_reply_is_read_without_notes() -> None:
    for raw, schema in [('{"facts": ["Caroline went hiking"]}', ExtractedFacts), ('{"ops": [{"op": "NOOP"}]}', ManagerDecision), ('{"answer": "Buddy", "evidence": [0]}', AnswerOut)]:
        p = parse(raw, schema)
        assert p.ok and p.notes == () and not p.repaired
