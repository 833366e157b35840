"""The management benchmark's generator: deterministic, disjoint splits, consistent gold, pairs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import combinations

import pytest

from memsdk.eval.manage import templates as tpl
from memsdk.eval.manage.scenarios import EVENT_CLASSES, PAIR_LABELS, SIZES, Scenario, demo_scenario, generate, mentions, pairs, scenarios, write_pairs

SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def generated() -> dict[str, list[Scenario]]:
    return {split: generate(split) for split in SPLITS}


def test_the_same_seed_gives_the_same_scenarios_and_a_prefix_for_fewer() -> None:
    assert generate("val", 8, seed=3) == generate("val", 8, seed=3)
    assert generate("val", 8, seed=3) != generate("val", 8, seed=4)
    assert generate("val", 5, seed=3) == generate("val", 8, seed=3)[:5]


def test_default_sizes(generated: dict[str, list[Scenario]]) -> None:
    assert {s: len(v) for s, v in generated.items()} == SIZES == {"train": 120, "val": 40, "test": 60}
    assert all(len({sc.id for sc in v}) == len(v) for v in generated.values())


def test_splits_share_no_template_no_name_and_no_value(generated: dict[str, list[Scenario]]) -> None:
    for a, b in combinations(SPLITS, 2):
        assert not tpl.template_ids(a) & tpl.template_ids(b)
        assert not set(tpl.names(a)) & set(tpl.names(b))
        for pool in ("city", "job", "pet", "diet", "hobby", "condition", "event", "day", "car", "street"):
            assert not set(tpl.values(pool, a)) & set(tpl.values(pool, b)), pool
        used = {s: ({t for sc in generated[s] for t in sc.templates}, {n for sc in generated[s] for n in sc.names}) for s in (a, b)}
        assert not used[a][0] & used[b][0] and not used[a][1] & used[b][1]
    for split, scs in generated.items():
        for sc in scs:
            assert set(sc.templates) <= tpl.template_ids(split) and set(sc.names) <= set(tpl.names(split))
            assert set(sc.speakers) <= set(sc.names)


def test_every_kind_of_phrasing_has_one_in_every_split() -> None:
    groups = {(t.kind, t.slot) for t in tpl._all()}
    for split in SPLITS:
        assert all(tpl.templates(split, kind, slot) for kind, slot in groups), split


def test_train_only_phrasings_are_trains_and_say_nothing_val_or_test_says() -> None:
    extra = [t for t in tpl._all() if t.id.rsplit(".", 1)[1].startswith("t")]
    assert extra and {t.split for t in extra} == {"train"}
    assert {(t.kind, t.slot) for t in extra} <= {(t.kind, t.slot) for t in tpl._all() if t not in extra}  # no new kind of event

    def words(text: str) -> str:
        return " ".join(text.casefold().replace("[", " ").replace("]", " ").replace("|", " ").split()).strip(" .")

    held_out = {words(t.text) for t in tpl._all() if t.split != "train"}
    assert not [t.id for t in extra if words(t.text) in held_out]


def test_every_event_class_is_exercised(generated: dict[str, list[Scenario]]) -> None:
    for scs in generated.values():
        events = {e.event for sc in scs for e in sc.episodes} | {t.event for sc in scs for t in sc.turns}
        assert events - {None} == set(EVENT_CLASSES)
        assert {e.slot for sc in scs for e in sc.episodes} == set(tpl.SLOTS)
        relatives = [f"'s {rel}" for rel in ("brother", "sister", "dad", "mum", "cousin", "flatmate")]
        assert any(q.slot != "family" and any(f"{q.owner}{rel}" in q.text for rel in relatives) for sc in scs for q in sc.questions)  # third persons


def _check_gold(sc: Scenario) -> None:
    turns = {t.turn_id: t for t in sc.turns}
    order = {t.turn_id: i for i, t in enumerate(sc.turns)}
    facts = {f.value: f for f in sc.facts}
    assert len(turns) == len(sc.turns) and len(facts) == len(sc.facts)
    for fact in sc.facts:
        assert fact.stated_in and fact.owner in sc.speakers
        for turn_id in fact.stated_in:
            assert turns[turn_id].speaker == fact.owner and mentions(turns[turn_id].text, fact.value), (sc.id, fact)
        if fact.status == "superseded":
            new = facts[fact.replaced_by or ""]
            assert new.status == "current" and order[new.stated_in[0]] > order[fact.stated_in[0]]
        episode_turns = {t for e in sc.episodes if e.owner == fact.owner for t in e.turn_ids}
        for turn in sc.turns:  # a value is said only in its own episode, by its owner
            if mentions(turn.text, fact.value):
                assert turn.turn_id in episode_turns and turn.speaker == fact.owner, (sc.id, fact.value, turn.text)
                assert fact.status != "forgotten" or turn.turn_id in fact.stated_in
    for ep in sc.episodes:
        if ep.event == "supersede":  # replaced without repeating the old value
            old = [f for f in sc.facts if f.status == "superseded" and f.stated_in[0] == ep.turn_ids[0]]
            assert old and not any(mentions(turns[ep.turn_ids[1]].text, f.value) for f in old)
        assert [order[t] for t in ep.turn_ids] == sorted(order[t] for t in ep.turn_ids)
        assert len({turns[t].turn_id.split(":")[0] for t in ep.turn_ids}) == len(ep.turn_ids)  # each step in a later session
    for q in sc.questions:
        fact = next(f for f in sc.facts if q.gold in (f.value, f.answer))
        assert fact.status == {"current": "current", "previous": "superseded"}[q.kind] and fact.owner == q.owner
        assert all(facts[v].status != "current" for v in q.excludes)


def test_the_gold_of_every_scenario_is_consistent(generated: dict[str, list[Scenario]]) -> None:
    for scs in generated.values():
        for sc in scs:
            _check_gold(sc)
            sessions = sorted({t.turn_id.split(":")[0] for t in sc.turns})
            assert 2 <= len(sessions) <= 4
            for a, b in zip(sc.turns, sc.turns[1:]):  # time moves on, and speakers take turns within a session
                assert isinstance(a.timestamp, datetime) and isinstance(b.timestamp, datetime) and a.timestamp < b.timestamp
                assert a.turn_id.split(":")[0] != b.turn_id.split(":")[0] or a.speaker != b.speaker
            assert {s.user_id for s in sc.scopes()} == {s.lower() for s in sc.speakers} and {s.run_id for s in sc.scopes()} == {sc.id}


def test_relative_dates_resolve_against_the_session_day() -> None:
    found = 0
    for sc in generate("train", 60):
        for fact in sc.facts:
            if fact.event == "relative_date":
                turn = sc.turn(fact.stated_in[0])
                assert isinstance(turn.timestamp, datetime) and turn.timestamp.weekday() == 5  # sessions fall on Saturdays
                phrase = next(t for t in turn.templates if t.startswith("relative."))
                when = turn.timestamp + timedelta(days=tpl.RELATIVE_DAYS[int(phrase.rsplit(".", 1)[1])])
                assert fact.answer == f"{when.day} {when:%B}"
                found += 1
    assert found


def test_pairs_are_labelled_from_the_gold(tmp_path) -> None:
    found = pairs("train")
    assert {p.label for p in found} == set(PAIR_LABELS)
    for sc in generate("train", 30):
        mine = [p for p in found if p.scenario == sc.id]
        for ep in sc.episodes:
            new, old = (sc.turn(t).text for t in ep.turn_ids[-1:] + ep.turn_ids[:1])
            label = {"supersede": "supersedes", "correct_not": "corrects", "correct_plain": "corrects", "duplicate": "duplicates", "compatible": "compatible", "forget": "forget_target"}.get(ep.event)
            if label is not None:
                assert any(p.new == new and p.old == old and p.label == label for p in mine), (sc.id, ep)
    assert all(p.label == "unrelated" for p in found if p.event == "injection")
    assert len({(p.scenario, p.new, p.old) for p in found}) == len(found)  # one label per pair
    n = write_pairs(tmp_path / "pairs.jsonl", "val", 10)
    lines = (tmp_path / "pairs.jsonl").read_text().splitlines()
    assert n == len(lines) == len(pairs("val", 10)) and {"new", "old", "label"} <= json.loads(lines[0]).keys()


def test_the_demo_split_takes_its_gold_from_the_demo_questions() -> None:
    (sc,) = scenarios("demo")
    assert sc == demo_scenario() and sc.split == "demo" and sc.speakers == ("Maya", "Leo")
    current = {f.value: f for f in sc.facts if f.status == "current"}
    assert {"York", "school nurse", "Hanna", "19 April", "Pixel", "cello"} <= current.keys()
    assert current["York"].owner == "Maya" and current["Hanna"].owner == "Leo"
    assert {f.value for f in sc.facts if f.status == "superseded"} == {"Anna", "12 April", "Leeds", "St. Mary's"}
    assert [f.value for f in sc.facts if f.status == "forgotten"] == ["07700 900123"]
    assert next(q for q in sc.questions if q.gold == "York").excludes == ("Leeds",)
    _check_demo_evidence(sc)
    assert {p.label for p in pairs("demo")} == {"corrects", "supersedes", "forget_target", "unrelated"}


def _check_demo_evidence(sc: Scenario) -> None:
    for fact in sc.facts:
        assert all(mentions(sc.turn(t).text, fact.value) and sc.turn(t).speaker == fact.owner for t in fact.stated_in), fact
