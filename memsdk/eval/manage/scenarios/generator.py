"""The scenario generator: `generate(split, n, seed)` draws each scenario's speakers, dates,
episodes and chit-chat from the split's templates, and is pure: the same arguments give the
same scenarios."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from memsdk.eval.manage import templates as tpl
from memsdk.eval.manage.scenarios.models import EventClass, Episode, Fact, Question, Scenario, ScenarioTurn, Status, mentions
from memsdk.eval.manage.templates import RELATIVE_DAYS, SLOTS, THIRD_PERSON_SLOTS, Split, Subject, Template, render, slot_kinds

__all__ = ["SIZES", "generate"]

#: scenarios per split by default
SIZES: dict[str, int] = {"train": 120, "val": 40, "test": 60}

#: the first episode's class, in turn: every class gets its share of any split size
_MAIN: tuple[EventClass, ...] = ("supersede", "correct_not", "forget", "compatible", "supersede", "correct_plain", "duplicate", "injection", "forget", "relative_date", "state", "supersede")
_SECOND: tuple[EventClass, ...] = ("state", "supersede", "correct_not", "correct_plain", "forget", "compatible", "duplicate", "relative_date")
_FORGETTABLE = ("phone", "email", "address", "health", "relationships")
_CONTACT = ("phone", "email", "address")
_RELATIVES = (("brother", "him", True), ("sister", "her", True), ("dad", "him", False), ("mum", "her", False), ("cousin", "her", True), ("flatmate", "him", True))
_POOL = {"home": "city", "job": "job", "pets": "pet", "diet": "diet", "hobbies": "hobby", "health": "condition", "possessions": "car"}


def _slots_for(event: EventClass) -> tuple[str, ...]:
    if event == "forget":
        return _FORGETTABLE
    if event == "relative_date":
        return ("schedule",)
    if event in ("supersede", "compatible"):
        return tuple(s for s in SLOTS if event in slot_kinds(s))
    return SLOTS


@dataclass
class _Step:
    session: int
    speaker: str
    text: str
    event: EventClass | None
    templates: tuple[str, ...]


@dataclass
class _Plan:
    event: EventClass
    slot: str
    owner: str
    steps: list[_Step] = field(default_factory=list)
    facts: list[tuple[dict[str, Any], tuple[int, ...]]] = field(default_factory=list)  # Fact fields but stated_in, and the steps stating it
    questions: list[Question] = field(default_factory=list)


class _Builder:
    """One scenario: its random draws, the values and names it has used, its sessions."""

    def __init__(self, split: Split, sid: str, rng: random.Random) -> None:
        self.split, self.id, self.rng = split, sid, rng
        self.names: list[str] = []
        self.used: list[str] = []  # values, so that no two overlap
        self.templates: list[str] = []
        self.speakers = (self.name(), self.name())
        self.sessions = rng.randint(2, 4)
        start = datetime(2023, 1, 7, tzinfo=UTC) + timedelta(weeks=rng.randint(0, 90))  # a Saturday
        self.dates = [start]
        for _ in range(self.sessions - 1):
            self.dates.append(self.dates[-1] + timedelta(weeks=rng.randint(1, 5)))
        self.dates = [d.replace(hour=rng.randint(9, 20), minute=rng.choice((0, 15, 30, 45))) for d in self.dates]

    # -- draws ------------------------------------------------------------------------------

    def name(self) -> str:
        name = self.rng.choice([n for n in tpl.names(self.split) if n not in self.names])
        self.names.append(name)
        return name

    def value(self, pool: Sequence[str]) -> str:
        free = [v for v in pool if not any(mentions(v, u) or mentions(u, v) for u in self.used)]
        value = self.rng.choice(free)
        self.used.append(value)
        return value

    def slot_value(self, slot: str, owner: str) -> str:
        if slot in _POOL:
            return self.value(tpl.values(_POOL[slot], self.split))
        if slot in ("relationships", "family"):
            return self.name()
        if slot == "schedule":
            return self.value(tpl.values("day", self.split))
        if slot == "phone":
            return self.value([f"555-01{n:02d}" for n in range(100)])
        if slot == "email":
            return self.value([f"{owner.lower()}.{box}@{domain}" for box in tpl.values("mailbox", self.split) for domain in tpl.values("domain", self.split)])
        assert slot == "address"
        return self.value([f"{n} {street}" for street in tpl.values("street", self.split) for n in range(2, 99)])

    def template(self, kind: str, slot: str | None = None) -> Template:
        chosen = self.rng.choice(tpl.templates(self.split, kind, slot))
        self.templates.append(chosen.id)
        return chosen

    def subject(self, slot: str, owner: str) -> Subject:
        if slot not in THIRD_PERSON_SLOTS or self.rng.random() >= 0.35:
            return Subject(True, "I", "me", owner)
        rel, obj, named = self.rng.choice(_RELATIVES)
        return Subject(False, f"my {rel} {self.name()}" if named else f"my {rel}", obj, f"{owner}'s {rel}")

    def sessions_for(self, steps: int, first: int | None = None) -> list[int]:
        """Distinct sessions, in order, for an episode's steps; each after the one before."""
        start = first if first is not None else self.rng.randint(0, self.sessions - steps)
        return sorted(self.rng.sample(range(start, self.sessions), steps))

    # -- episodes ---------------------------------------------------------------------------

    def episode(self, event: EventClass, owner: str, taken: set[str], first: int | None) -> _Plan:
        slot = self.rng.choice([s for s in _slots_for(event) if s not in taken])
        subject = self.subject(slot, owner)
        extras = self.extras(slot)
        plan = _Plan(event, slot, owner)
        forget_old = event == "forget" and slot in _CONTACT and self.sessions >= 3 and self.rng.random() < 0.5
        n_steps = 1 if event in ("state", "relative_date") else 3 if forget_old else 2
        sessions = self.sessions_for(n_steps, first)

        def say(kind: str, values: dict[str, str], event_: EventClass | None, *, outer: str | None = None, extra: dict[str, str] | None = None) -> None:
            """Add a step: a ``kind`` phrasing, wrapped in an ``outer`` generic one when given."""
            inner = self.template(kind, slot)
            text = render(inner.text, subject, extras | values)
            ids: tuple[str, ...] = (inner.id,)
            if outer is not None:
                wrapper = self.template(outer)
                text = render(wrapper.text, subject, {"clause": _inner(text), **(extra or {})})
                ids += (wrapper.id,)
            plan.steps.append(_Step(sessions[len(plan.steps)], owner, text, event_, ids))

        def fact(value: str, status: Status, steps: tuple[int, ...], **kw: Any) -> None:
            plan.facts.append(({"value": value, "status": status, "event": event, "slot": slot, "owner": owner, **kw}, steps))

        def ask(kind: Literal["current", "previous"], gold: str, excludes: tuple[str, ...] = (), values: dict[str, str] | None = None) -> None:
            q = self.template(f"q_{kind}", slot)
            text = render(q.text, subject, extras | {"who": subject.who} | (values or {}))
            plan.questions.append(Question(text=text, gold=gold, kind=kind, event=event, slot=slot, owner=owner, excludes=excludes))

        if event == "relative_date":
            phrasing = self.template("relative", slot)
            when = self.dates[sessions[0]] + timedelta(days=RELATIVE_DAYS[int(phrasing.id.rsplit(".", 1)[1])])
            answer = f"{when.day} {when:%B}"
            plan.steps.append(_Step(sessions[0], owner, render(phrasing.text, subject, extras), event, (phrasing.id,)))
            fact(extras["event"], "current", (0,), answer=answer)
            ask("current", answer)
            return plan

        old = self.slot_value(slot, owner)
        say("state", _values(old), None)
        if slot == "schedule":  # the other fact of the same turn: a correction of the day must keep it
            fact(extras["place"], "current", (0,))
        if event in ("state", "injection", "duplicate"):
            if event == "duplicate":
                say("clause", _values(old), event, outer="duplicate")
            if event == "injection":
                wrapper = self.template("injection")
                plan.steps.append(_Step(sessions[1], owner, wrapper.text, event, (wrapper.id,)))
            fact(old, "current", tuple(range(len(plan.steps))) if event == "duplicate" else (0,), duplicate=event == "duplicate")
            ask("current", old)
            return plan

        new = self.slot_value(slot, owner)
        old_ref = f"the {old}" if slot == "schedule" else old
        if event == "forget":
            if forget_old:
                say("supersede", _values(new, "new"), "supersede")
                fact(new, "current", (1,))
                ask("current", new, (old,))
            desc = self.template("desc_old" if forget_old else "desc", slot)
            request = self.template("forget")
            text = render(request.text, subject, {"desc": _inner(render(desc.text, subject, {}))})
            plan.steps.append(_Step(sessions[-1], owner, text, event, (desc.id, request.id)))
            fact(old, "forgotten", (0,))
            return plan
        if event == "compatible":
            say("compatible", _values(new, "new"), event)
            fact(old, "current", (0,))
            fact(new, "current", (1,))
            return plan
        if event == "supersede":
            say("supersede", _values(new, "new"), event)
        else:
            say("clause", _values(new), event, outer=event, extra={"old": old_ref})
        fact(old, "superseded", (0,), replaced_by=new)
        fact(new, "current", (1,))
        ask("current", new, (old,))
        if event == "supersede":
            ask("previous", old, values=_values(new, "new"))
        return plan

    def extras(self, slot: str) -> dict[str, str]:
        """The fixed parts of a slot's phrasings: the pet's species, the event and its place, the relative."""
        if slot == "pets":
            return {"species": self.rng.choice(("dog", "cat"))}
        if slot == "schedule":
            return {"event": self.value(tpl.values("event", self.split)), "place": self.value(tpl.values("city", self.split))}
        if slot == "family":
            return {"rel": self.rng.choice(("sister", "brother"))}
        return {}

    # -- the conversation -------------------------------------------------------------------

    def build(self, plans: Sequence[_Plan]) -> Scenario:
        a, b = self.speakers
        other = {a: b, b: a}
        turns: list[ScenarioTurn] = []
        where: dict[tuple[int, int], str] = {}  # (plan, step) -> turn id
        for s in range(self.sessions):
            session_turns: list[tuple[str, str, EventClass | None, tuple[str, ...]]] = []

            def chat(speaker: str) -> None:
                t = self.template("chitchat")
                session_turns.append((speaker, t.text, "chitchat", (t.id,)))

            if self.rng.random() < 0.3:
                chat(self.rng.choice(self.speakers))
            for p, plan in enumerate(plans):
                for i, step in enumerate(plan.steps):
                    if step.session != s:
                        continue
                    if session_turns and session_turns[-1][0] == step.speaker:
                        chat(other[step.speaker])
                    where[p, i] = f"D{s + 1}:{len(session_turns) + 1}"
                    session_turns.append((step.speaker, step.text, step.event, step.templates))
                    if self.rng.random() < 0.6:
                        chat(other[step.speaker])
            if not session_turns:
                chat(a)
                chat(b)
            start = self.dates[s]
            turns += [
                ScenarioTurn(speaker=sp, text=text, timestamp=start + timedelta(minutes=2 * k), turn_id=f"D{s + 1}:{k + 1}", event=ev, templates=ids)
                for k, (sp, text, ev, ids) in enumerate(session_turns)
            ]
        facts = [Fact(**fields, stated_in=tuple(where[p, i] for i in steps)) for p, plan in enumerate(plans) for fields, steps in plan.facts]
        episodes = [Episode(event=plan.event, slot=plan.slot, owner=plan.owner, turn_ids=tuple(where[p, i] for i in range(len(plan.steps)))) for p, plan in enumerate(plans)]
        return Scenario(
            id=self.id, split=self.split, speakers=self.speakers, turns=tuple(turns), facts=tuple(facts),
            questions=tuple(q for plan in plans for q in plan.questions), episodes=tuple(episodes),
            templates=tuple(dict.fromkeys(self.templates)), names=tuple(self.names),
        )


def _inner(text: str) -> str:
    """A rendered phrasing as the middle of a sentence: "My hobby is chess" -> "my hobby is chess" ("I'm ..." stays)."""
    return text if text[:2] in ("I ", "I'") else text[:1].lower() + text[1:]


def _values(value: str, key: str = "v") -> dict[str, str]:
    article = "an" if value[:1].lower() in "aeiou" else "a"
    return {key: value, f"a_{key}": f"{article} {value}"}


def _generate_one(split: Split, index: int, seed: int) -> Scenario:
    rng = random.Random(f"memsdk-manage:{seed}:{split}:{index}")
    builder = _Builder(split, f"{split}-{index:03d}", rng)
    first = _MAIN[index % len(_MAIN)]
    owner = rng.choice(builder.speakers)
    plans = [builder.episode(first, owner, set(), 0)]
    if rng.random() < 0.5:
        taken = {plans[0].slot} | ({"home", "address"} if plans[0].slot in ("home", "address") else set())
        second_owner = rng.choice(builder.speakers)
        event = rng.choice(_SECOND)
        if any(s not in taken for s in _slots_for(event)):
            plans.append(builder.episode(event, second_owner, taken, None))
    return builder.build(plans)


def generate(split: Split, n: int | None = None, *, seed: int = 0) -> list[Scenario]:
    """``n`` scenarios of ``split`` (default `SIZES`), the same for the same arguments; the
    first ``k`` of ``n`` are the ``k`` scenarios of a smaller ``n``."""
    return [_generate_one(split, i, seed) for i in range(SIZES[split] if n is None else n)]
