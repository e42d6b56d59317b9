"""From a matched sentence to a local answer: which tool to call, and what to say.

A local answer calls the same tools a model would (`clock`, `calculator`, `timer`,
`conversation_history`) so the conversation keeps the same trace either way; what is
said is made from the tool's output: its value, or its error, never its text read back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from assistant.local.matcher import IntentMatch, IntentMatcher
from assistant.local.memory_answers import search_arguments, spoken_memory
from assistant.local.memory_questions import memory_question
from assistant.local.places import place_said, tells_world_time, zone_of
from assistant.tools import ToolOutput
from memory.search import Passage


@dataclass(frozen=True)
class LocalAnswer:
    intent: str
    tool: str | None = None
    """The tool to call, or None when the answer needs none ("say that again")."""
    arguments: dict = field(default_factory=dict)
    speak: Callable[[ToolOutput], str] = lambda output: output.text
    """What is said, from the tool's output."""
    said: str = ""
    """The answer, when no tool is called."""
    stop: bool = False
    """"Never mind"/"stop": nothing is said, nothing is added to the conversation."""


def _spoken_time(output: ToolOutput) -> str:
    return f"It's {_clock_words(output.value)}."


def _clock_words(now: datetime) -> str:
    """"1:25 PM"."""
    return f"{now.hour % 12 or 12}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}"


def _spoken_time_in(zone: str, place: str) -> Callable[[ToolOutput], str]:
    """The clock's reading (the machine's time, as for "what time is it") said in the
    place's zone, with the day when it is another day there."""
    def speak(output: ToolOutput) -> str:
        here: datetime = output.value
        there = here.astimezone(ZoneInfo(zone))
        day = "" if there.date() == here.date() else f" on {there:%A}"
        return f"It's {_clock_words(there)}{day} in {place}."
    return speak


def _spoken_date(output: ToolOutput) -> str:
    day: datetime = output.value
    return f"Today is {day:%A}, {day:%B} {day.day}, {day.year}."


def _number(value: float | int) -> str:
    try:
        value = float(value)
    except OverflowError:  # an integer beyond any float (10 ** 400): said as infinity
        value = math.inf if value > 0 else -math.inf
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    shown = f"{value:.6g}"
    return shown if float(shown) == value else f"about {shown}"


# Spoken operators, longest first, and how the calculator writes them.
_OPERATORS = (
    ("to the power of", "**"), ("multiplied by", "*"), ("divided by", "/"), ("times", "*"),
    ("plus", "+"), ("minus", "-"), ("over", "/"), ("mod", "%"), ("modulo", "%"),
    ("squared", "**2"), ("cubed", "**3"), ("x", "*"), ("×", "*"), ("÷", "/"),
)
_SAID = {"**": "to the power of", "*": "times", "/": "divided by", "+": "plus", "-": "minus",
         "%": "modulo"}
_ARITHMETIC = re.compile(r"^[\d.\s()+\-*/%]*\d[\d.\s()+\-*/%]*$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def expression_of(words: str) -> str | None:
    """"17 times 23" → "17 * 23"; None unless what is left is plain arithmetic."""
    text = words.lower().strip().rstrip("?.!").strip()
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)  # 1,000 → 1000
    text = re.sub(r"^(the answer to|the result of|the value of)\s+", "", text)
    for spoken, symbol in _OPERATORS:
        text = re.sub(rf"(?<![a-z]){re.escape(spoken)}(?![a-z])", f" {symbol} ", text)
    text = " ".join(text.split())
    if not _ARITHMETIC.match(text) or not re.search(r"\d\s*(\*\*|[+\-*/%])\s*[\d(-]", text):
        return None
    return text


def _spoken_expression(expression: str) -> str:
    tokens = re.findall(r"\*\*|\d+(?:\.\d+)?|[+\-*/%()]", expression)
    return " ".join(_SAID.get(token, token) for token in tokens)


def _spoken_calculation(said: str) -> Callable[[ToolOutput], str]:
    def speak(output: ToolOutput) -> str:
        if output.error is not None:
            if isinstance(output.error.cause, ZeroDivisionError):
                return f"{said} has no answer: nothing can be divided by zero."
            return f"I couldn't work out {said}."
        return f"{said} is {_number(output.value)}."
    return speak


def _operand(text: str) -> str | None:
    text = text.strip().rstrip("?.!%").strip()
    return text if _NUMBER.match(text) else None


def _calculation(match: IntentMatch) -> LocalAnswer | None:
    slots = match.slots
    if match.intent == "ParleyPercent":
        a, b = _operand(str(slots["number_a"])), _operand(str(slots["number_b"]))
        if a is None or b is None:
            return None
        expression, said = f"{a} / 100 * {b}", f"{a} percent of {b}"
    elif match.intent == "ParleySquareRoot":
        a = _operand(str(slots["number_a"]))
        if a is None:
            return None
        expression, said = f"sqrt({a})", f"The square root of {a}"
    else:
        found = expression_of(str(slots["expression"]))
        if found is None:
            return None
        expression, said = found, _spoken_expression(found)
    said = said[0].upper() + said[1:]
    return LocalAnswer(match.intent, "calculator", {"expression": expression},
                       _spoken_calculation(said))


def _seconds(slots: dict, prefix: str = "") -> int:
    return int(round(sum(float(slots.get(f"{prefix}{unit}", 0) or 0) * size
                         for unit, size in (("hours", 3600), ("minutes", 60), ("seconds", 1)))))


def _picked(slots: dict) -> dict:
    """Which timer a request means: its name, or the duration it was set for."""
    picked: dict = {}
    if slots.get("name"):
        picked["name"] = str(slots["name"]).strip().lower()
    set_for = _seconds(slots, "start_")
    if set_for:
        picked["set_for"] = set_for
    return picked


_TIMER_ACTIONS = {"HassCancelTimer": "cancel", "HassCancelAllTimers": "cancel_all",
                  "HassTimerStatus": "status", "HassPauseTimer": "pause",
                  "HassUnpauseTimer": "resume", "HassIncreaseTimer": "add",
                  "HassDecreaseTimer": "remove"}


def _time_in(match: IntentMatch) -> LocalAnswer | None:
    """The time in a place; a place not known is said so, never guessed."""
    place = place_said(str(match.slots["place"]))
    if not place or any(c.isdigit() for c in place):
        return None  # "what time is it in 5 minutes": no place
    found = zone_of(place)
    if found is None:
        return LocalAnswer(match.intent, said=f"I don't know the time zone of {place}.")
    return LocalAnswer(match.intent, "clock", {}, _spoken_time_in(*found))


def _spoken_result(output: ToolOutput) -> str:
    return output.error.message if output.error is not None else output.text


def _quoted(passage: Passage, limit: int) -> str:
    """A passage's first line, on one line, cut at a word within `limit` characters."""
    snippet = " ".join(passage.text.split("\n", 1)[0].split())
    if len(snippet) > limit:
        snippet = snippet[:limit].rsplit(" ", 1)[0] + "…"
    return snippet


def _passages(output: ToolOutput) -> tuple[Passage, ...]:
    return () if output.error is not None else output.value


def _spoken_recall(topic: str) -> Callable[[ToolOutput], str]:
    def speak(output: ToolOutput) -> str:
        found = _passages(output)
        if not found:
            return f"I can't find anything earlier in this conversation about {topic}."
        parts = []
        for passage in found[:2]:
            who = passage.message.role
            speaker = {"user": "you said", "assistant": "I said"}.get(who, f"the {who} was")
            parts.append(f"In message {passage.message.seq}, {speaker}: "
                         f"“{_quoted(passage, 240)}”")
        return " ".join(parts)
    return speak


def spoken_day(said: date, today: date) -> str:
    """A day as said aloud: "today", "yesterday", "on Saturday, December 5" (with the
    year when it is not this year's)."""
    if said == today:
        return "today"
    if said == today - timedelta(days=1):
        return "yesterday"
    return f"on {said:%A}, {said:%B} {said.day}" + (
        f", {said.year}" if said.year != today.year else "")


def _spoken_when(topic: str, today: Callable[[], date] = date.today
                 ) -> Callable[[ToolOutput], str]:
    def speak(output: ToolOutput) -> str:
        # The first passage of a message whose time is known.
        found = next((p for p in _passages(output) if p.message.at is not None), None)
        if found is None:
            return f"I can't find anything earlier in this conversation about {topic}."
        at = found.message.at
        return (f"You mentioned it {spoken_day(at.date(), today())} at {at:%H:%M}, in "
                f"message {found.message.seq}: “{_quoted(found, 160)}”")
    return speak


MEMORY_INTENT = "ParleyMemoryQuestion"


class LocalIntents:
    """Answers the everyday requests without the model; one per conversation (it remembers
    a question it asked, such as a timer's length).

    With `memory_questions`, a question about what the user said or about their own
    things ("what is my name", "where did I park") that no template matched is answered
    from the conversation (`assistant.local.memory_answers`), found or not.
    """

    def __init__(self, matcher: IntentMatcher | None = None,
                 memory_questions: bool = True) -> None:
        self.matcher = matcher or IntentMatcher()
        self.memory_questions = memory_questions
        self._pending_timer: str | None = None
        """A timer was asked for without a length: its name, while "for how long?" waits."""

    def answer(self, text: str, last_reply: str | None = None,
               tools: Collection[str] = ()) -> LocalAnswer | None:
        """`tools`: the names of the tools the model could call instead."""
        pending, self._pending_timer = self._pending_timer, None
        if pending is not None:
            for match in self.matcher.match(f"set a timer for {text}"):
                if match.intent == "HassStartTimer":
                    return self._start_timer(dict(match.slots, name=match.slots.get("name")
                                                  or pending))
        for match in self.matcher.match(text):
            if match.intent == "ParleyTimeIn":
                answer = None if tells_world_time(tools) else _time_in(match)
            else:
                answer = self._answer(match, last_reply)
            if answer is not None:
                return answer
        question = memory_question(text) if self.memory_questions else None
        if question is not None:
            return LocalAnswer(MEMORY_INTENT, "conversation_history", search_arguments(question),
                               spoken_memory(question))
        return None

    def _start_timer(self, slots: dict) -> LocalAnswer | None:
        seconds = _seconds(slots)
        arguments = {"action": "start", "seconds": seconds}
        if slots.get("name"):
            arguments["name"] = str(slots["name"]).strip().lower()
        return LocalAnswer("HassStartTimer", "timer", arguments, _spoken_result)

    def _answer(self, match: IntentMatch, last_reply: str | None) -> LocalAnswer | None:
        intent, slots = match.intent, match.slots
        if intent == "HassGetCurrentTime":
            return LocalAnswer(intent, "clock", {}, _spoken_time)
        if intent == "HassGetCurrentDate":
            return LocalAnswer(intent, "clock", {}, _spoken_date)
        if intent == "HassStartTimer":
            # "in 5 minutes turn off the oven": a command to run later is the model's.
            return None if "conversation_command" in slots else self._start_timer(slots)
        if intent in _TIMER_ACTIONS:
            arguments = {"action": _TIMER_ACTIONS[intent], **_picked(slots)}
            if intent in ("HassIncreaseTimer", "HassDecreaseTimer"):
                arguments["seconds"] = _seconds(slots)
            return LocalAnswer(intent, "timer", arguments, _spoken_result)
        if intent == "ParleyTimerWithoutDuration":
            name = str(slots.get("name") or "").strip().lower()
            if name in ("a", "an", "the"):
                name = ""
            self._pending_timer = name
            return LocalAnswer(intent, said="For how long? Say, for example, ten minutes.")
        if intent in ("HassNevermind", "ParleyStop"):
            return LocalAnswer(intent, stop=True)
        if intent == "ParleyRepeat":
            return LocalAnswer(intent, said=last_reply or "I haven't said anything yet.")
        if intent == "ParleyRecallWhen":
            topic = str(slots["topic"]).strip().rstrip("?.!")
            return LocalAnswer(intent, "conversation_history",
                               {"query": topic, "speaker": "user"}, _spoken_when(topic))
        if intent == "ParleyRecall":
            topic = str(slots["topic"]).strip().rstrip("?.!")
            # "What did I say": what the user said, not Parley's answers about it.
            return LocalAnswer(intent, "conversation_history",
                               {"query": topic, "speaker": "user"}, _spoken_recall(topic))
        return _calculation(match)
