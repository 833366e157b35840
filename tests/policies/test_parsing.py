"""Parsing with one repair: what is accepted, what is repaired, what fails."""

from __future__ import annotations

import pytest

from memsdk.policies.parsing import close_truncated, find_json_object, parse
from memsdk.policies.schemas import AnswerOut, ExtractedFacts, ManagerDecision


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
    assert parse('{"facts": [' + facts + "]}", ExtractedFacts).value.facts == [f"fact {i}" for i in range(20)]
    looped = '{"facts": ["Mel paints", "The group", "The group", "the group ", "The group"]}'
    assert parse(looped, ExtractedFacts).value.facts == ["Mel paints", "The group"]
    assert not parse('{"answer": "' + "word " * 20_000 + '"}', AnswerOut).ok  # 100 KB: over the parse limit


def test_bare_ops_are_accepted_as_a_decision() -> None:
    assert parse('{"op": "NOOP"}', ManagerDecision).value.ops[0].op == "NOOP"
    assert len(parse('[{"op": "ADD", "text": "x"}, {"op": "NOOP"}]', ManagerDecision).value.ops) == 2
