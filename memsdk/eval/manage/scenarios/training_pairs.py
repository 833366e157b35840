"""Training pairs for a pair classifier: labelled (new text, old text) examples derived
from the scenarios' gold (`pairs`), and the relations between an episode's turns they come from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from memsdk.eval.manage.scenarios.demo import scenarios
from memsdk.eval.manage.scenarios.models import Episode, EventClass, Scenario, ScenarioSplit

__all__ = ["PairLabel", "PAIR_LABELS", "Pair", "relations", "pairs", "write_pairs"]

PairLabel = Literal["supersedes", "corrects", "duplicates", "compatible", "forget_target", "unrelated"]
PAIR_LABELS: tuple[PairLabel, ...] = get_args(PairLabel)


class Pair(BaseModel):
    """One training example for a pair classifier: does ``new`` supersede / correct /
    duplicate / sit beside / ask to forget ``old``, or is it unrelated?"""

    model_config = ConfigDict(frozen=True)

    new: str
    old: str
    label: PairLabel
    new_speaker: str
    old_speaker: str
    scenario: str
    event: EventClass
    slot: str


#: (new step, old step, label) within an episode, by its class (forget with three steps: the old value was replaced first)
_WITHIN: dict[str, tuple[tuple[int, int, PairLabel], ...]] = {
    "supersede": ((1, 0, "supersedes"),),
    "correct_not": ((1, 0, "corrects"),),
    "correct_plain": ((1, 0, "corrects"),),
    "duplicate": ((1, 0, "duplicates"),),
    "compatible": ((1, 0, "compatible"),),
    "forget": ((1, 0, "forget_target"),),
    "forget3": ((1, 0, "supersedes"), (2, 0, "forget_target"), (2, 1, "unrelated")),
    "injection": ((1, 0, "unrelated"),),
}


def relations(sc: Scenario) -> list[tuple[str, str, PairLabel, Episode]]:
    """(new turn id, old turn id, label, episode) for each turn of an episode that acts on an
    earlier one: what the gold says a manager should do with the old turn's fact."""
    out = []
    for ep in sc.episodes:
        key = "forget3" if ep.event == "forget" and len(ep.turn_ids) == 3 else ep.event
        out += [(ep.turn_ids[new], ep.turn_ids[old], label, ep) for new, old, label in _WITHIN.get(key, ())]
    return out


def _scenario_pairs(sc: Scenario) -> list[Pair]:
    out: list[Pair] = []

    def pair(new_id: str, old_id: str, label: PairLabel, ep: Episode) -> None:
        new, old = sc.turn(new_id), sc.turn(old_id)
        out.append(Pair(new=new.text, old=old.text, label=label, new_speaker=new.speaker, old_speaker=old.speaker, scenario=sc.id, event=ep.event, slot=ep.slot))

    for new_id, old_id, label, ep in relations(sc):
        pair(new_id, old_id, label, ep)
    labelled = {(p.new, p.old) for p in out}
    for ep in sc.episodes:  # another episode's turns, and chit-chat, change nothing about this one's fact
        for other in sc.episodes:
            new_id, old_id = other.turn_ids[-1], ep.turn_ids[0]
            # unless they share a turn (the demo's "nurse in Leeds" is a job and a home)
            if other is not ep and old_id not in other.turn_ids and (sc.turn(new_id).text, sc.turn(old_id).text) not in labelled:
                pair(new_id, old_id, "unrelated", ep)
                labelled.add((out[-1].new, out[-1].old))
    chat = [t for t in sc.turns if t.event == "chitchat"]
    if chat and sc.episodes:
        pair(chat[0].turn_id, sc.episodes[0].turn_ids[0], "unrelated", sc.episodes[0])
    return out


def pairs(split: ScenarioSplit, n: int | None = None, *, seed: int = 0) -> list[Pair]:
    """Labelled (new, old) examples derived from the gold of a split's scenarios."""
    return [p for sc in scenarios(split, n, seed=seed) for p in _scenario_pairs(sc)]


def write_pairs(path: str | Path, split: ScenarioSplit, n: int | None = None, *, seed: int = 0) -> int:
    """`pairs` as JSON lines at ``path``; returns how many."""
    found = pairs(split, n, seed=seed)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(json.dumps(p.model_dump(), ensure_ascii=False) + "\n" for p in found), encoding="utf-8")
    return len(found)
