"""LoCoMo (snap-research/locomo, CC BY-NC 4.0) as typed conversations, sessions, turns and QA.

The file is not shipped: `locomo_path` looks at ``$MEMSDK_LOCOMO``, then at
``../shared/data/locomo10.json`` beside the repository. Splits follow Memory-R1/R2:
conv-26 is train, conv-30 validation, the other eight test; category 5 (adversarial)
is excluded from scoring unless asked for.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from memsdk.errors import DatasetNotFound
from memsdk.types import Turn

__all__ = ["LocomoQA", "LocomoSession", "LocomoConversation", "load_locomo", "locomo_path", "session_date", "split_of", "SPLITS", "Split"]

Split = Literal["train", "val", "test"]
SPLITS: dict[str, Split] = {"conv-26": "train", "conv-30": "val"}
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


_DATE = re.compile(r"\bon (.+)$")


def session_date(date_time: str | None) -> str | None:
    """"1:56 pm on 8 May, 2023" -> "8 May, 2023".

    Questions ask for days, never times of day, and the time's colon would end up inside
    "Speaker (on 1:56 pm ...): text", where readers that split "speaker: text" at the first
    colon (the extractive answerer does) would cut the memory in the wrong place.
    """
    if not date_time:
        return None
    found = _DATE.search(date_time)
    return found.group(1) if found else date_time


def split_of(sample_id: str) -> Split:
    return SPLITS.get(sample_id, "test")


@dataclass(frozen=True)
class LocomoQA:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, str(self.category))


@dataclass(frozen=True)
class LocomoSession:
    index: int
    date_time: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[LocomoSession, ...]
    qa: tuple[LocomoQA, ...]

    @property
    def split(self) -> Split:
        return split_of(self.sample_id)

    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]

    def day_stamped_turns(self) -> list[Turn]:
        """The turns stamped with their session's day (`session_date`), as the trainers see them."""
        return [t.model_copy(update={"timestamp": session_date(s.date_time)}) for s in self.sessions for t in s.turns]

    def questions(self, *, include_adversarial: bool = False) -> list[LocomoQA]:
        return [q for q in self.qa if include_adversarial or q.category != 5]


WHERE_FROM = "data/locomo10.json of the snap-research/locomo release on GitHub, CC BY-NC 4.0"


def locomo_path() -> Path:
    """``$MEMSDK_LOCOMO`` if set, else ``../shared/data/locomo10.json`` beside the repository.

    Raises `DatasetNotFound` (one line: where to put the file, where it comes from).
    """
    if env := os.environ.get("MEMSDK_LOCOMO"):
        if not Path(env).is_file():
            raise DatasetNotFound(f"LoCoMo not found at MEMSDK_LOCOMO={env}: point it at locomo10.json ({WHERE_FROM})")
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data" / "locomo10.json"
        if candidate.is_file():
            return candidate
    raise DatasetNotFound(f"LoCoMo not found: set MEMSDK_LOCOMO=/path/to/locomo10.json or put it at ../shared/data/ beside the repository ({WHERE_FROM})")


def _turn(raw: dict[str, Any], date_time: str) -> Turn:
    text = raw.get("text") or ""
    if raw.get("blip_caption"):  # shared photos: the caption is what a reader of the chat sees
        text = f"{text} [shares a photo: {raw['blip_caption']}]".strip()
    return Turn(speaker=raw["speaker"], text=text, timestamp=date_time, turn_id=raw["dia_id"])


def load_locomo(path: str | None = None) -> tuple[LocomoConversation, ...]:
    # the path is resolved on every call, the file parsed once per path: MEMSDK_LOCOMO
    # pointed elsewhere (or nowhere) later is obeyed, not answered from the first load
    return _parse(str(path or locomo_path()))


@lru_cache(maxsize=4)
def _parse(path: str) -> tuple[LocomoConversation, ...]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions = tuple(
            LocomoSession(n, conv.get(f"session_{n}_date_time", ""), tuple(_turn(t, conv.get(f"session_{n}_date_time", "")) for t in conv[f"session_{n}"] if (t.get("text") or t.get("blip_caption"))))
            for n in numbers
        )
        qa = tuple(
            LocomoQA(q["question"], str(q.get("answer", q.get("adversarial_answer", ""))), tuple(q.get("evidence", [])), int(q["category"]))
            for q in sample["qa"]
        )
        conversations.append(LocomoConversation(sample["sample_id"], (conv["speaker_a"], conv["speaker_b"]), sessions, qa))
    return tuple(conversations)
