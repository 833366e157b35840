"""Which shown turns a fact came from (`cited_turns`), and the word test behind the guards."""

from __future__ import annotations

from memsdk.grounding import cited_turns, grounded
from memsdk.types import Turn

GINA = Turn(speaker="Gina", text="We just did a contemporary piece called Finding Freedom.", turn_id="D1:3", timestamp="4:04 pm on 20 January, 2023")
JON = Turn(speaker="Jon", text="Lost my job as a banker yesterday, so I'm starting my own dance studio.", turn_id="D1:4", timestamp="4:04 pm on 20 January, 2023")
SMALL = Turn(speaker="Jon", text="Cool!", turn_id="D1:5")


def ids(turns: list[Turn] | None) -> list[str | None] | None:
    return None if turns is None else [t.turn_id for t in turns]


def test_a_fact_the_turn_states_cites_the_turn() -> None:
    assert ids(cited_turns("Jon is starting his own dance studio", [JON], [GINA])) == ["D1:4"]
    # the speaker's name and the turn's date count as said by the turn
    assert ids(cited_turns("Jon lost his banker job on 20 January 2023", [JON], [GINA])) == ["D1:4"]
    # third person and tense: words are compared by their first letters
    assert ids(cited_turns("Jon started a dance studio", [JON], [])) == ["D1:4"]


def test_a_fact_from_a_context_turn_cites_that_turn_not_the_current_one() -> None:
    assert ids(cited_turns("Gina did a contemporary piece called Finding Freedom", [SMALL], [GINA, JON])) == ["D1:3"]


def test_a_fact_joining_two_turns_cites_both_in_conversation_order() -> None:
    fact = "Jon opens a dance studio after Gina's contemporary piece Finding Freedom"
    assert ids(cited_turns(fact, [SMALL], [GINA, JON])) == ["D1:3", "D1:4"]


def test_a_fact_no_shown_turn_holds_is_not_cited() -> None:
    # the prompt's example, copied into the reply
    assert cited_turns("Adopted another dog named Buddy, has two dogs now", [JON], [GINA]) is None
    assert cited_turns("the", [JON], [GINA]) is None  # no content word at all
    assert cited_turns("Jon has a cat named Scout and lives in Paris", [JON], [GINA]) is None


def test_grounded_needs_the_share_of_content_words() -> None:
    assert grounded("alice likes green tea", ["alice: I like green tea"], 0.5)
    assert not grounded("the capital of france is paris", ["alice: I like green tea"], 0.5)
    assert not grounded("", ["anything"], 0.0)
