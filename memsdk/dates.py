"""When a memory happened: reading the timestamps apps send, and writing them for a prompt.

Apps send a turn's time as a datetime, an ISO string, or free text such as LoCoMo's
"1:56 pm on 8 May, 2023". `parse_when` reads the forms it knows and returns None for the
rest (the caller keeps the raw text); `render_when` writes a date the way LoCoMo's questions
and a small model's answers use it ("8 May 2023").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["MONTH", "parse_when", "render_when", "render_timestamp", "render_day", "resolve_relative", "with_year"]

#: a month's name or abbreviation ("Sep", "Sept", "September"), for a pattern compiled with
#: re.I: memsdk's one list of them (the dates here, personal data, a correction's values)
MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
# "1:56 pm on 8 May, 2023" / "8 May 2023" / "May 8, 2023", each part optional where LoCoMo omits it
_CLOCK = r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})\s*(?P<ampm>am|pm)?\s*(?:on\s+)?)?"
_DAY_MONTH = re.compile(_CLOCK + rf"(?P<d>\d{{1,2}})\s+(?P<mo>{MONTH})\.?,?\s+(?P<y>\d{{4}})$", re.I)
_MONTH_DAY = re.compile(_CLOCK + rf"(?P<mo>{MONTH})\.?\s+(?P<d>\d{{1,2}}),?\s+(?P<y>\d{{4}})$", re.I)


def _month_number(match: re.Match[str]) -> int:
    return _MONTHS.index(match["mo"][:3].lower()) + 1


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
        if m := pattern.match(text):
            hour = int(m["h"] or 0)
            if m["ampm"]:
                hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
            try:
                return datetime(int(m["y"]), _month_number(m), int(m["d"]), hour, int(m["mi"] or 0), tzinfo=UTC)
            except ValueError:  # 31 February, 25 o'clock
                return None
    return None


def render_when(value: datetime) -> str:
    """``8 May 2023``, with the clock time in front when there is one (``1:56 pm on 8 May 2023``)."""
    day = render_day(value)
    if value.hour == 0 and value.minute == 0:
        return day
    hour = value.hour % 12 or 12
    return f"{hour}:{value.minute:02d} {'am' if value.hour < 12 else 'pm'} on {day}"


def render_timestamp(value: datetime | str) -> str:
    """A turn's timestamp as a prompt or a fact shows it: text as the app wrote it, a datetime
    the way `render_when` writes one (not Python's ``2026-12-01 01:46:05.636576+00:00``)."""
    return render_when(value) if isinstance(value, datetime) else value


def render_day(value: datetime) -> str:
    return f"{value.day} {value.strftime('%B')} {value.year}"


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_NUMBER = r"\d{1,2}|" + "|".join(_NUMBERS)
_COUNT = r"(?P<n>" + _NUMBER + ")"


def _month(value: datetime, delta: int) -> str:
    index = value.year * 12 + value.month - 1 + delta
    return f"{datetime(index // 12, index % 12 + 1, 1).strftime('%B')} {index // 12}"


def _last_weekday(value: datetime, name: str) -> str:
    back = (value.weekday() - _WEEKDAYS.index(name.lower())) % 7 or 7
    return render_day(value - timedelta(days=back))


def _coming_weekday(value: datetime, name: str, *, today: bool) -> str:
    """The first ``name`` after ``value`` ("next Friday" said on a Saturday is six days on:
    the reading most people mean and calendars apply); ``today``: ``value`` itself may be it
    ("this Friday" said on a Friday)."""
    days_on = (_WEEKDAYS.index(name.lower()) - value.weekday()) % 7
    return render_day(value + timedelta(days=days_on if today else days_on or 7))


_DAYS = "(?P<day>" + "|".join(_WEEKDAYS) + ")"

_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str], datetime], str]]] = [
    # the longer phrase first: a match that starts earlier wins, so "tomorrow" inside "the
    # day after tomorrow" and "today" inside "a week from today" are not resolved again
    (re.compile(r"\bthe day after tomorrow\b", re.I), lambda m, d: render_day(d + timedelta(days=2))),
    (re.compile(r"\bthe day before yesterday\b", re.I), lambda m, d: render_day(d - timedelta(days=2))),
    (re.compile(r"\b(?:in " + _COUNT + r" days?|(?P<n2>" + _NUMBER + r") days? from (?:now|today))\b", re.I), lambda m, d: render_day(d + timedelta(days=_n(m)))),
    (re.compile(r"\b(?:in " + _COUNT + r" weeks?|(?P<n2>" + _NUMBER + r") weeks? from (?:now|today))\b", re.I), lambda m, d: render_day(d + timedelta(weeks=_n(m)))),
    (re.compile(r"\bnext " + _DAYS + r"\b", re.I), lambda m, d: _coming_weekday(d, m["day"], today=False)),
    (re.compile(r"\bthis (?:coming )?" + _DAYS + r"\b", re.I), lambda m, d: _coming_weekday(d, m["day"], today=True)),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), lambda m, d: render_day(d - timedelta(days=1))),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), lambda m, d: render_day(d)),
    (re.compile(r"\btomorrow\b", re.I), lambda m, d: render_day(d + timedelta(days=1))),
    (re.compile(r"\b" + _COUNT + r" days? ago\b", re.I), lambda m, d: render_day(d - timedelta(days=_n(m)))),
    (re.compile(r"\b" + _COUNT + r" weeks? ago\b", re.I), lambda m, d: f"{_n(m)} week{'s' * (_n(m) > 1)} before {render_day(d)}"),
    (re.compile(r"\blast week(?!end)\b", re.I), lambda m, d: f"the week before {render_day(d)}"),
    (re.compile(r"\blast weekend\b", re.I), lambda m, d: f"the weekend before {render_day(d)}"),
    (re.compile(r"\bnext week(?!end)\b", re.I), lambda m, d: f"the week after {render_day(d)}"),
    (re.compile(r"\blast month\b", re.I), lambda m, d: _month(d, -1)),
    (re.compile(r"\bnext month\b", re.I), lambda m, d: _month(d, 1)),
    (re.compile(r"\b" + _COUNT + r" months? ago\b", re.I), lambda m, d: _month(d, -_n(m))),
    (re.compile(r"\blast year\b", re.I), lambda m, d: str(d.year - 1)),
    (re.compile(r"\bnext year\b", re.I), lambda m, d: str(d.year + 1)),
    (re.compile(r"\b" + _COUNT + r" years? ago\b", re.I), lambda m, d: str(d.year - _n(m))),
    (re.compile(r"\blast " + _DAYS + r"\b", re.I), lambda m, d: _last_weekday(d, m["day"])),
]


def _n(match: re.Match[str]) -> int:
    found = match.groupdict()  # "in N days" names its count n, "N days from now" n2
    raw = (found.get("n") or found["n2"]).lower()
    return int(raw) if raw.isdigit() else _NUMBERS[raw]


def resolve_relative(text: str, when: datetime | None) -> str:
    """``text`` with each relative date it uses followed by the date it means, resolved
    against ``when`` (the turn's time): "I went yesterday" said on 8 May 2023 becomes "I went
    yesterday (7 May 2023)". The words are kept, so nothing said is lost, and a question
    about May 7th now finds the turn (LoCoMo's temporal questions ask for these dates).
    What it resolves: yesterday / today / tonight / tomorrow / last night, N days / weeks /
    months / years ago, last / next week, last weekend, last / next month, last / next
    year, last <weekday>, next / this <weekday> (the coming one), in N days / weeks, N
    days / weeks from now or today, the day after tomorrow, the day before yesterday. Text without ``when``, or already resolved, is returned unchanged."""
    if when is None:
        return text
    out, last, reach = [], 0, 0
    spans = sorted(((m.start(), m.end(), rule(m, when)) for pattern, rule in _RULES for m in pattern.finditer(text)), key=lambda s: (s[0], -s[1]))
    for start, end, meaning in spans:
        if start < reach:
            continue  # inside an earlier phrase: "tomorrow" in "the day after tomorrow"
        reach = end
        if not text[end:].startswith(f" ({meaning})"):  # not resolved already
            out.append(text[last:end] + f" ({meaning})")
            last = end
    return "".join(out) + text[last:]


_ORDINAL = r"(?:st|nd|rd|th)?"
# "19 April", "19th of April", "the 19th of April", "April 19", "April 19th": a day without its year
_BARE_DAY = [
    re.compile(r"(?:on\s+)?(?:the\s+)?(?P<d>\d{1,2})" + _ORDINAL + rf"\s+(?:of\s+)?(?P<mo>{MONTH})\.?", re.I),
    re.compile(rf"(?:on\s+)?(?P<mo>{MONTH})\.?\s+(?P<d>\d{{1,2}})" + _ORDINAL, re.I),
]


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # 29 February outside a leap year
        return None


def with_year(text: str, when: datetime) -> str | None:
    """``text`` with a year when it is a day without one ("19 April" -> "19 April 2025"), else
    None. The year is the one that puts the day nearest ``when`` (the time it was said): "19
    April" said on 20 March 2025 is 19 April 2025, "28 December" said on 3 January 2026 is 28
    December 2025."""
    day_text = text.strip().rstrip(".")
    for pattern in _BARE_DAY:
        if m := pattern.fullmatch(day_text):
            said_at = parse_when(when) or when
            days = [day for shift in (-1, 0, 1) if (day := _day(said_at.year + shift, _month_number(m), int(m["d"])))]
            if not days:  # 31 February
                return None
            nearest = min(days, key=lambda day: abs(day - said_at))
            return f"{day_text}{',' if pattern is _BARE_DAY[1] else ''} {nearest.year}"
    return None
