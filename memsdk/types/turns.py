"""A conversation turn as an app hands it over (`Turn`), and how an episodic record shows
a turn: its "Speaker (on date)" header, then its words."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from memsdk.dates import parse_when, render_when
from memsdk.types.fields import ScopeId, Text, check_storable

__all__ = ["Turn", "HEADER", "split_header", "turn_header", "shown_when", "turn_parts"]

#: the "Speaker (on date): " header an episodic turn is shown after and the heuristic
#: extractor copies into a fact; dates contain colons too
HEADER = re.compile(r"^[^:(]{1,80}(\([^)]*\))?:\s*")


def split_header(text: str) -> tuple[str, str]:
    """``text`` as its "Speaker (on date)" header (`HEADER`, without the colon) and the words
    after it; ("", text) when it has none, or nothing after it."""
    found = HEADER.match(text)
    if found is None or found.end() >= len(text):
        return "", text
    return found.group().rstrip().removesuffix(":").rstrip(), text[found.end():]


def turn_header(speaker: str | None, when: str | None) -> str:
    """What an episodic turn is shown after: ``Caroline (on 8 May 2023)``, or the speaker alone
    when the turn has no time (`MemoryRecord.render` puts ": <text>" after it)."""
    head = speaker or "someone"
    return f"{head} (on {when})" if when else head


def shown_when(turn: Turn) -> str | None:
    """A turn's time as its episodic record shows it (`MemoryRecord.render`): as the app wrote
    it, or a datetime the way `render_when` writes one."""
    if isinstance(turn.timestamp, str):
        return turn.timestamp
    when = parse_when(turn.timestamp)
    return render_when(when) if when else None


def turn_parts(turn: Turn) -> tuple[str, str]:
    """A turn as its episodic record is shown, in two: its header and its words (what the bank
    embeds for it: `MemoryRecord.shown_parts`)."""
    return turn_header(turn.speaker, shown_when(turn)), turn.text


class Turn(BaseModel):
    """One conversation turn as an app hands it to ``ingest``.

    ``turn_id`` links memories back to the turns they came from (LoCoMo's ``D1:3``);
    ``timestamp`` is free text or a datetime, because real apps and LoCoMo both write
    dates like "1:56 pm on 8 May, 2023".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    speaker: ScopeId
    text: Text
    # free text is kept as written (metadata.timestamp) and shown in what is extracted from the turn
    timestamp: datetime | Annotated[str, AfterValidator(check_storable)] | None = None
    turn_id: ScopeId | None = None
