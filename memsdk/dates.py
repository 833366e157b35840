"""When a memory happened: reading the timestamps apps send, and writing them for a prompt.

Apps send a turn's time as a datetime, an ISO string, or free text such as LoCoMo's
"1:56 pm on 8 May, 2023". `parse_when` reads the forms it knows and returns None for the
rest (the caller keeps the raw text); `render_when` writes a date the way LoCoMo's questions
and a small model's answers use it ("8 May 2023").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["parse_when", "render_when"]

_MONTHS = {m: i for i, m in enumerate("january february march april may june july august september october november december".split(), start=1)}
_MONTHS |= {m[:3]: i for m, i in list(_MONTHS.items())}
# "1:56 pm on 8 May, 2023" / "8 May 2023" / "May 8, 2023", each part optional where LoCoMo omits it
_CLOCK = r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})\s*(?P<ampm>am|pm)?\s*(?:on\s+)?)?"
_DAY_MONTH = re.compile(_CLOCK + r"(?P<d>\d{1,2})\s+(?P<mo>[a-z]+)\.?,?\s+(?P<y>\d{4})$", re.I)
_MONTH_DAY = re.compile(_CLOCK + r"(?P<mo>[a-z]+)\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})$", re.I)


def parse_when(value: datetime | str | None) -> datetime | None:
    """A timezone-aware datetime for the forms above (naive ones are taken as UTC), else None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = value.strip()
    try:
        return parse_when(datetime.fromisoformat(text))
    except ValueError:
        pass
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        if (m := pattern.match(text)) and (month := _MONTHS.get(m["mo"].lower())):
            hour = int(m["h"] or 0)
            if m["ampm"]:
                hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
            try:
                return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["mi"] or 0), tzinfo=UTC)
            except ValueError:  # 31 February, 25 o'clock
                return None
    return None


def render_when(value: datetime) -> str:
    """``8 May 2023``, with the clock time in front when there is one (``1:56 pm on 8 May 2023``)."""
    day = f"{value.day} {value.strftime('%B')} {value.year}"
    if value.hour == 0 and value.minute == 0:
        return day
    hour = value.hour % 12 or 12
    return f"{hour}:{value.minute:02d} {'am' if value.hour < 12 else 'pm'} on {day}"
