"""Home Assistant's sentence matcher over its English sentences and Parley's own.

The templates are loaded and compiled once, when Parley starts (the first match of an
uncompiled set costs ~100 ms, later ones about a millisecond).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

from assistant.local.sentences import HANDLED_HA_INTENTS, PARLEY_INTENTS, PARLEY_LISTS

log = logging.getLogger(__name__)

LATE_INTENTS = ("ParleyTimeIn", "ParleyTimerWithoutDuration", "ParleyRecallWhen",
                "ParleyRecall", "ParleyPercent", "ParleySquareRoot", "ParleyCalculate")
"""Tried after every other match, in this order: their open slots would swallow any
sentence ("set a 10 minute pizza timer" is a timer *with* a duration)."""


@dataclass(frozen=True)
class IntentMatch:
    intent: str
    slots: dict[str, object]
    """Slot name → value (numbers for the timer slots, text for the open ones)."""
    text: str
    """The sentence as matched (number words already written as digits)."""


_ONE_UNIT = re.compile(r"\b(for|add|remove|subtract|take off|in) (a|an|one) (hour|minute|second)\b",
                       re.IGNORECASE)
_ONE_UNIT_TIMER = re.compile(r"\b(a|an|one) (hour|minute)( |-)timer\b", re.IGNORECASE)
_AND_A_HALF = re.compile(r"\b(\d+) (hour|minute)s? and a half\b", re.IGNORECASE)


def normalized(text: str) -> str:
    """Digits for number words ("seventeen times twenty three" → "17 times 23": Whisper
    writes both), and "a minute", "an hour and a half" as numbers the templates read."""
    from text_to_num import alpha2digit

    text = alpha2digit(text, "en")
    text = _ONE_UNIT.sub(r"\1 1 \3", text)
    text = _ONE_UNIT_TIMER.sub(r"1 \2 timer", text)
    return _AND_A_HALF.sub(lambda m: f"{m[1]} {m[2]}s and 30 "
                           f"{'minutes' if m[2].lower() == 'hour' else 'seconds'}", text)


class IntentMatcher:
    """`match(text)` → every reading of `text` as an intent Parley handles, best first."""

    def __init__(self) -> None:
        from hassil import Intents
        from hassil.intents import TextSlotList
        from home_assistant_intents import get_intents

        started = time.monotonic()
        data = get_intents("en")
        if data is None:
            raise RuntimeError("home-assistant-intents has no English sentences")
        intents = {name: {"data": list(data["intents"][name]["data"])}
                   for name in HANDLED_HA_INTENTS}
        for name, extra in PARLEY_INTENTS.items():
            intents.setdefault(name, {"data": []})["data"].extend(extra["data"])
        merged = dict(data, intents=intents, lists={**data["lists"], **PARLEY_LISTS})
        self._intents = Intents.from_dict(merged)
        # Home Assistant fills these from its devices and areas; Parley has none.
        self._slot_lists = {name: TextSlotList.from_strings([])
                            for name in ("name", "area", "floor")}
        self.match("what time is it")  # compiles the templates now, not on the first request
        log.debug("local intents: %d intents loaded and compiled in %.0f ms",
                  len(intents), (time.monotonic() - started) * 1000)

    def match(self, text: str) -> list[IntentMatch]:
        from hassil import recognize_all

        # Lone surrogates (a JSON "\udcff") cannot be encoded, and the number parser needs to.
        text = text.encode("utf-8", "replace").decode("utf-8").strip()
        if not text:
            return []
        text = normalized(text)
        found, seen = [], set()
        for result in recognize_all(text, self._intents, slot_lists=self._slot_lists):
            slots = {name: entity.value for name, entity in result.entities.items()}
            key = (result.intent.name, tuple(sorted((k, str(v)) for k, v in slots.items())))
            if key not in seen:
                seen.add(key)
                found.append(IntentMatch(result.intent.name, slots, text))
        # Literal templates first; then the reading whose open slots took the fewest words
        # ("pizza", not "a pizza").
        found.sort(key=lambda m: (LATE_INTENTS.index(m.intent) + 1
                                  if m.intent in LATE_INTENTS else 0,
                                  sum(len(v) for v in m.slots.values() if isinstance(v, str))))
        return found
