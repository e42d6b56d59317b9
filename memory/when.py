"""The days a question is about: "on 3 March", "last Tuesday", "yesterday", "last week".

Messages carry when they were said, so a question about a day can prefer what was said
that day. Only plain English day phrases are read; anything else is no day at all, and
the search goes on by words alone.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

MONTHS = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
    ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
    ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for name in names}
WEEKDAYS = {name: number for number, name in enumerate(
    "monday tuesday wednesday thursday friday saturday sunday".split())}
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(rf"\b{_DAY}(?:\s+of)?\s+({_MONTH})\b\.?(?:,?\s+(\d{{4}}))?")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+{_DAY}\b(?:,?\s+(\d{{4}}))?")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_WEEKDAY = re.compile(r"\b(last\s+)?(" + "|".join(WEEKDAYS) + r")s?\b")
_AGO = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(day|week|month)s?\s+ago\b")
_IN_MONTH = re.compile(rf"\b(?:in|during|early|late|mid)\s+({_MONTH})\b")

Days = tuple[date, date]
"""A span of days, first and last included."""


def days_asked(question: str, now: datetime) -> list[Days]:
    """The spans of days `question` names, relative to `now`; [] when it names none."""
    text = question.lower()
    today = now.date()
    spans: list[Days] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], span: Days | None) -> None:
        if span is not None and not any(a < match.end() and match.start() < b for a, b in taken):
            spans.append(span)
            taken.append((match.start(), match.end()))

    for match in _ISO.finditer(text):
        add(match, _one(_date(int(match[1]), int(match[2]), int(match[3]))))
    for match in _DAY_MONTH.finditer(text):
        add(match, _one(_dated(int(match[1]), MONTHS[match[2]], match[3], today)))
    for match in _MONTH_DAY.finditer(text):
        add(match, _one(_dated(int(match[2]), MONTHS[match[1]], match[3], today)))
    for match in _AGO.finditer(text):
        count = int(match[1]) if match[1].isdigit() else NUMBER_WORDS[match[1]]
        size = {"day": 1, "week": 7, "month": 30}[match[2]]
        middle = today - timedelta(days=count * size)
        slack = timedelta(days=0 if size == 1 else size // 2)
        add(match, (middle - slack, middle + slack))
    for match in _WEEKDAY.finditer(text):
        back = (today.weekday() - WEEKDAYS[match[2]]) % 7
        if match[1] and back == 0:
            back = 7  # "last Saturday" on a Saturday is a week ago
        add(match, _one(today - timedelta(days=back)))
    for match in _IN_MONTH.finditer(text):
        add(match, _month(MONTHS[match[1]], today))
    for phrase, span in _relative(today).items():
        for match in re.finditer(rf"\b{phrase}\b", text):
            add(match, span)
    return spans


def _relative(today: date) -> dict[str, Days]:
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    last_month_end = first - timedelta(days=1)
    # Longer phrases first: "the day before yesterday" is not yesterday.
    return {
        "the day before yesterday": _one(today - timedelta(days=2)),
        "today": (today, today),
        "this morning": (today, today),
        "tonight": (today, today),
        "yesterday": _one(today - timedelta(days=1)),
        "last night": _one(today - timedelta(days=1)),
        "this week": (monday, today),
        "last week": (monday - timedelta(days=7), monday - timedelta(days=1)),
        "this month": (first, today),
        "last month": (last_month_end.replace(day=1), last_month_end),
    }


def _one(day: date | None) -> Days | None:
    return None if day is None else (day, day)


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _dated(day: int, month: int, year: str | None, today: date) -> date | None:
    """A day and month: in the year given, or the latest one not after today."""
    if year:
        return _date(int(year), month, day)
    found = _date(today.year, month, day)
    if found is not None and found > today:
        found = _date(today.year - 1, month, day)
    return found


def _month(month: int, today: date) -> Days:
    year = today.year if month <= today.month else today.year - 1
    first = date(year, month, 1)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return first, following - timedelta(days=1)
