"""What a question asks of time (`asks_now`), and what an answer is made before it is
returned: the whole identifier (`whole_value`), the corrected value (`apply_correction`), the
day with its year (`complete_date`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memsdk.pipeline.personal_data import DataKind, values
from memsdk.pipeline.answers import apply_correction, asks_before, asks_now, complete_date, holders, second_look, whole_value
from memsdk.policies import Answer
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Tier, content_hash

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def shown(text: str, *, superseded: bool = False, said: datetime | None = None, until: datetime | None = None) -> ScoredMemory:
    r = MemoryRecord(
        id=uuid.uuid4(), text=text, scope=Scope(user_id="u"), created_at=NOW, updated_at=NOW, version=1, content_hash=content_hash(text),
        tier=Tier.SEMANTIC, invalid_at=until or (NOW if superseded else None), occurred_at=said,
    )
    return ScoredMemory(record=r, score=0.5)


def answered(text: str, memories: list[ScoredMemory], evidence: int | None = None, question: str = "") -> str:
    cited = [] if evidence is None else [memories[evidence].record]
    return whole_value(Answer(text, cited), memories, question).text


def test_values_says_what_detect_found_in_order() -> None:
    text = "Mail zara.cobalt@example.net or call me on 555-0187."
    assert values(text) == [(DataKind.EMAIL, "zara.cobalt@example.net"), (DataKind.PHONE, "555-0187")]
    assert values("I live in Boston") == []


def test_a_part_of_an_address_or_a_number_is_answered_whole() -> None:
    memories = [shown("Zara (on 13 July 2024): Send the photos to zara.cobalt@example.net."), shown("Mei: You can reach me on 555-0187.")]
    assert answered("example.net", memories) == "zara.cobalt@example.net"
    assert answered("Example.net.", memories) == "zara.cobalt@example.net"
    assert answered("555", memories) == "555-0187"
    assert answered("zara.cobalt@example.net", memories) == "zara.cobalt@example.net"


def test_what_is_not_part_of_an_identifier_is_left_as_answered() -> None:
    memories = [shown("Sam (on 8 May 2023): I was born on 3 March 1990 and live at 12 Oak Street."), shown("Sam: my email is sam@x.org")]
    assert answered("1990", memories) == "1990"  # a date may be asked for in part
    assert answered("Oak Street", memories) == "Oak Street"  # so may an address
    assert answered("sa", memories) == "sa"  # too short to say which value
    assert answered("unknown", memories) == "unknown"
    assert answered("Paris", memories) == "Paris"


def test_a_part_of_a_postal_address_is_answered_whole_only_when_the_question_asks_for_one() -> None:
    memories = [shown("Lina (on 8 May 2023): Post goes to 27 Birch Road these days.")]
    for question in ("Where should mail for Lina go?", "What is Lina's postal address?", "Where can I send Lina a parcel?"):
        assert answered("Birch Road", memories, question=question) == "27 Birch Road", question
    for question in ("Which street does Lina live on?", "Where does Lina live?", ""):
        assert answered("Birch Road", memories, question=question) == "Birch Road", question
    ended = [shown("Dmitri: My address is 35 Station Road.")]  # the sentence's dot is not the address's
    assert answered("35 Station Road", ended, question="What is Dmitri's address?") == "35 Station Road"
    assert answered("Station Road", ended, question="What is Dmitri's address?") == "35 Station Road"


def test_the_cited_memory_says_which_value_else_the_first_shown() -> None:
    new, old = shown("My email is ann.new@example.net"), shown("My email was ann.old@example.net", superseded=True)
    assert answered("example.net", [new, old]) == "ann.new@example.net"
    assert answered("example.net", [new, old], evidence=1) == "ann.old@example.net"  # "what was her email before?"


def test_a_question_about_the_present_is_told_from_one_about_the_past() -> None:
    for question in ("What is Maya's job now?", "Which city does Maya live in now?", "What is the name of Leo's sister?",
                     "Where should mail for Thea go?", "Who is Dmitri's cousin's current partner?", "What does he drive these days?",
                     "Is she still vegan?"):
        assert asks_now(question), question
    for question in ("Who was Priya's previous partner?", "Which city was she based in before moving to Utrecht?",
                     "What date was the meeting first set for?", "When was the Lisbon half marathon?", "What did Leo say about the race?",
                     "How old is Leo?", "Where did she work in 2019?", "Caroline's identity"):
        assert not asks_now(question), question


def reply(question: str, text: str, memories: list[ScoredMemory], evidence: int | None = None) -> str:
    cited = [] if evidence is None else [memories[evidence].record]
    return apply_correction(question, Answer(text, cited), memories).text


def test_the_value_a_correction_calls_wrong_is_answered_with_the_right_one() -> None:
    turn = shown("Leo (on 20 March 2025): Quick correction from last time: my sister's name is Hanna, not Anna. Autocorrect keeps changing it.")
    other = shown("Leo (on 3 March 2025): My sister Hanna is visiting next week.")
    assert reply("What is the name of Leo's sister?", "Anna", [other, turn], evidence=1) == "Hanna"
    assert reply("What is the name of Leo's sister?", "Anna.", [other, turn]) == "Hanna"
    race = shown("Leo: Also, the race date was wrong. The Lisbon half marathon is on 19 April, not 12 April.")
    assert reply("When is the half marathon?", "12 April", [race]) == "19 April"
    # a long right-hand side: as many words before the comma as the answer has
    car = shown("Dmitri: Correction: I drive a VW Golf, not Ford Focus.")
    assert reply("What does Dmitri drive these days?", "Ford Focus", [car]) == "VW Golf"
    assert reply("What does Dmitri drive these days?", "a Ford Focus", [car]) == "VW Golf"


def test_an_answer_no_current_memory_corrects_is_left_as_answered() -> None:
    turn = shown("Leo: my sister's name is Hanna, not Anna.")
    assert reply("What name did Leo's sister get wrong?", "Anna", [turn]) == "Anna"  # a question about the mistake
    assert reply("What is not her name?", "Anna", [turn]) == "Anna"
    assert reply("What is the name of Leo's sister?", "Hanna", [turn]) == "Hanna"
    assert reply("What is the name of Leo's sister?", "Anna", [shown("Leo: my sister's name is Hanna, not Anna.", superseded=True)]) == "Anna"
    chat = shown("Jon: it's about how we learn, not just winning.")
    assert reply("What is it about?", "winning", [chat]) == "winning"  # "not just" corrects nothing
    assert reply("What is it about?", "Anna", [shown("Anna is here, not Bob")]) == "Anna"  # Anna is the X, not the Y


def test_a_day_without_its_year_gets_the_year_it_was_said_in() -> None:
    said = datetime(2025, 3, 20, tzinfo=UTC)
    race = shown("Leo: The Lisbon half marathon is on 19 April, not 12 April.", said=said)
    assert complete_date(Answer("19 April", []), [race]).text == "19 April 2025"
    assert complete_date(Answer("April 19", []), [shown("Leo: the race is on April 19", said=said)]).text == "April 19, 2025"
    # the year written after the day wins over the time it was said
    assert complete_date(Answer("3 March", []), [shown("Leo (on 1 May 2025): we met on 3 March 2024.", said=said)]).text == "3 March 2024"
    # late in a year, an early day is the next year's; early in a year, a late day last year's
    assert complete_date(Answer("5 January", []), [shown("Ann: the exam is on 5 January", said=datetime(2024, 12, 20, tzinfo=UTC))]).text == "5 January 2025"
    assert complete_date(Answer("28 December", []), [shown("Ann: we met on 28 December", said=datetime(2026, 1, 3, tzinfo=UTC))]).text == "28 December 2025"
    for text in ("19 April 2025", "Friday", "19", "Lisbon", "31 February"):
        assert complete_date(Answer(text, []), [shown(f"Leo: {text} and 19 April", said=said)]).text == text
    assert complete_date(Answer("19 April", []), [shown("Leo: nothing about it", said=said)]).text == "19 April"  # no memory holds it


def test_the_rewrites_in_answer_steps_order_mend_a_corrected_day_and_give_it_its_year() -> None:
    said = datetime(2025, 3, 20, tzinfo=UTC)
    race = shown("Leo: Also, the race date was wrong. The Lisbon half marathon is on 19 April, not 12 April.", said=said)
    question = "When is the Lisbon half marathon?"
    answer = whole_value(Answer("12 April", [race.record]), [race], question)
    assert complete_date(apply_correction(question, answer, [race]), [race]).text == "19 April 2025"


def test_an_answer_from_the_wrong_side_of_a_change_gets_a_second_look() -> None:
    moved = datetime(2024, 3, 1, tzinfo=UTC)
    old = shown("Thea: I live at 23 Bramble Way.", said=datetime(2024, 1, 1, tzinfo=UTC), until=moved)
    new = shown("Thea: Post goes to 18 Bramble Way these days.", said=moved)
    other = shown("Thea: my cat is called Miso.", said=datetime(2024, 2, 1, tzinfo=UTC))
    now = "Where should mail for Thea go?"
    assert holders(Answer("bramble way.", []), [old, new, other]) == [old.record, new.record] and holders(Answer("unknown", []), [old]) == []
    assert second_look(now, Answer("23 Bramble Way", []), [old, new, other]) == [new, other]
    assert second_look(now, Answer("18 Bramble Way", []), [old, new, other]) is None
    assert second_look(now, Answer("Bramble Way", []), [old, new]) is None  # a current memory holds it too
    assert second_look(now, Answer("Paris", []), [old, new]) is None  # from nowhere: not history's
    assert second_look(now, Answer("unknown", []), [old, new]) is None
    assert second_look(now, Answer("23 Bramble Way", []), [old]) is None  # nothing current to ask: the answer stays
    before = "Where did Thea live before?"
    assert second_look(before, Answer("18 Bramble Way", []), [old, new, other]) == [old]
    assert second_look(before, Answer("23 Bramble Way", []), [old, new, other]) is None
    assert second_look(before, Answer("Miso", []), [old, new, other]) is None  # said before anything shown ended
    assert second_look(before, Answer("18 Bramble Way", []), [new, other]) is None  # no history shown
    assert second_look("What did Thea say about mail?", Answer("18 Bramble Way", []), [old, new]) is None


def test_questions_about_before_are_told_apart() -> None:
    for question in ("Who was Priya's previous partner?", "What date was the meeting first set for?", "What was her old address?",
                     "Where did he live before moving to Utrecht?", "What car did she drive originally?"):
        assert asks_before(question), question
    for question in ("How old is Leo?", "Where does Thea live now?", "When was the race?"):
        assert not asks_before(question), question


def test_a_relative_day_gets_the_date_the_memory_resolved_it_to() -> None:
    said = datetime(2024, 5, 25, tzinfo=UTC)  # a Saturday
    meeting = shown("Fatima: My parent-teacher meeting is next Friday.", said=said)
    assert complete_date(Answer("Friday", []), [meeting]).text == "Friday (31 May 2024)"
    assert complete_date(Answer("next Friday", []), [meeting]).text == "next Friday (31 May 2024)"
    # a date the speaker wrote is theirs, and a word that is no relative day is left alone
    own = shown("Fatima: the meeting is on Friday (the 31st).", said=said)
    assert complete_date(Answer("Friday", []), [own]).text == "Friday"
    assert complete_date(Answer("parent-teacher meeting", []), [meeting]).text == "parent-teacher meeting"
