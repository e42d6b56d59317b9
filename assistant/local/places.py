"""The time somewhere else: a place's name to its time zone, from the zone database
(`zoneinfo`: every zone, offline), so "what time is it in Tokyo" needs no model, which
would make a time up.

A place is a zone's own city ("Asia/Tokyo": Tokyo; "America/New_York": New York) or one
of a few countries that keep a single time zone. Anything else is not guessed at.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from zoneinfo import available_timezones

_AREAS = ("Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe",
          "Indian", "Pacific")
"""The database's areas of places: not "Etc/GMT+5", "UTC" or the old "US/Eastern"."""

COUNTRIES = {
    "Japan": "Asia/Tokyo", "China": "Asia/Shanghai", "India": "Asia/Kolkata",
    "South Korea": "Asia/Seoul", "Korea": "Asia/Seoul", "Thailand": "Asia/Bangkok",
    "Vietnam": "Asia/Ho_Chi_Minh", "the Philippines": "Asia/Manila", "Israel": "Asia/Jerusalem",
    "Egypt": "Africa/Cairo", "Kenya": "Africa/Nairobi", "Nigeria": "Africa/Lagos",
    "South Africa": "Africa/Johannesburg", "France": "Europe/Paris",
    "Germany": "Europe/Berlin", "Italy": "Europe/Rome", "the Netherlands": "Europe/Amsterdam",
    "Belgium": "Europe/Brussels", "Switzerland": "Europe/Zurich", "Austria": "Europe/Vienna",
    "Poland": "Europe/Warsaw", "Sweden": "Europe/Stockholm", "Norway": "Europe/Oslo",
    "Denmark": "Europe/Copenhagen", "Finland": "Europe/Helsinki", "Greece": "Europe/Athens",
    "Ireland": "Europe/Dublin", "England": "Europe/London", "Scotland": "Europe/London",
    "Wales": "Europe/London", "the United Kingdom": "Europe/London", "the UK": "Europe/London",
    "Britain": "Europe/London", "Turkey": "Europe/Istanbul", "Ukraine": "Europe/Kyiv",
    "the Czech Republic": "Europe/Prague", "Hungary": "Europe/Budapest",
    "Iceland": "Atlantic/Reykjavik", "Colombia": "America/Bogota", "Peru": "America/Lima",
    "Argentina": "America/Argentina/Buenos_Aires",
}
"""Countries that keep one time zone (their mainland's), by the names people say."""

_SAID_AFTER = re.compile(r"\s+(right now|now|today|please|at the moment)$", re.IGNORECASE)


@cache
def _places() -> dict[str, tuple[str, str]]:
    """Each place's key (`_key`) → its zone and its name as said: "new york" →
    ("America/New_York", "New York")."""
    places: dict[str, tuple[str, str]] = {}
    # Sorted: a zone's current name ("America/Argentina/Buenos_Aires") before its old
    # link ("America/Buenos_Aires"); either tells the same time.
    for zone in sorted(available_timezones()):
        if zone.split("/", 1)[0] in _AREAS and "/" in zone:
            name = zone.rsplit("/", 1)[1].replace("_", " ")
            places.setdefault(_key(name), (zone, name))
    for country, zone in COUNTRIES.items():
        places.setdefault(_key(country).removeprefix("the "), (zone, country))
    return places


def _key(name: str) -> str:
    """"São Paulo", "sao paulo", "St. Johns" → "sao paulo", "st johns"."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return " ".join(re.sub(r"[.']", "", plain).lower().split())


def place_said(words: str) -> str:
    """The place in "what time is it in … right now?": without the words around it."""
    place = " ".join(words.split()).strip(" ?.!,")
    while _SAID_AFTER.search(place):
        place = _SAID_AFTER.sub("", place).strip(" ,")
    return place


def zone_of(place: str) -> tuple[str, str] | None:
    """The time zone of a place as said ("Tokyo", "new york city", "the Netherlands",
    "Paris, France") and its name as said, or None when none is known."""
    key = _key(place.replace(",", " ")).removeprefix("the ")
    candidates = [key, key.removesuffix(" city")]
    # "Paris France", as the matcher hands on "Paris, France": the city, in its country.
    candidates += [key.removesuffix(" " + _key(country).removeprefix("the ")).strip()
                   for country in COUNTRIES]
    return next((_places()[k] for k in candidates if k in _places()), None)


def tells_world_time(tool_names: Iterable[str]) -> bool:
    """A tool besides Parley's clock tells the time (an MCP time server's
    `time__get_current_time`): a place's time is then left to the model and that tool."""
    return any("time" in re.split(r"[^a-z]+", name.lower()) for name in tool_names)
