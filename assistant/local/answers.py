"""From a matched sentence to a local answer: which tool to call, and what to say.

A local answer calls the same tools a model would (`clock`, `calculator`, `timer`,
`conversation_history`) so the conversation keeps the same trace either way; what is
said is made from the tool's result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from assistant.local.matcher import IntentMatch, IntentMatcher

CLOCK_FORMAT = "%A, %d %B %Y, %H:%M:%S"
"""The start of the clock tool's result."""


@dataclass(frozen=True)
class LocalAnswer:
    intent: str
    tool: str | None = None
    """The tool to call, or None when the answer needs none ("say that again")."""
    arguments: dict = field(default_factory=dict)
    speak: Callable[[str, bool], str] = lambda result, is_error: result
    """What is said, from the tool's result and whether it was an error."""
    said: str = ""
    """The answer, when no tool is called."""
    stop: bool = False
    """"Never mind"/"stop": nothing is said, nothing is added to the conversation."""


def _clock_reading(result: str) -> datetime:
    return datetime.strptime(result.split(", time zone")[0], CLOCK_FORMAT)


def _spoken_time(result: str, is_error: bool) -> str:
    now = _clock_reading(result)
    hour = now.hour % 12 or 12
    return f"It's {hour}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}."


def _spoken_date(result: str, is_error: bool) -> str:
    day = _clock_reading(result)
    return f"Today is {day:%A}, {day:%B} {day.day}, {day.year}."


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
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


def _spoken_calculation(said: str) -> Callable[[str, bool], str]:
    def speak(result: str, is_error: bool) -> str:
        if is_error:
            if "division by zero" in result or "modulo by zero" in result:
                return f"{said} has no answer: nothing can be divided by zero."
            return f"I couldn't work out {said}."
        value = float(result.rsplit("=", 1)[1])
        return f"{said} is {_number(value)}."
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


def _spoken_result(result: str, is_error: bool) -> str:
    return result.removeprefix("Error: ")


def _spoken_recall(topic: str) -> Callable[[str, bool], str]:
    def speak(result: str, is_error: bool) -> str:
        hits = re.findall(r"^#(\d+) \(([^),]+)[^)]*\): (.*)$", result, re.MULTILINE)
        if is_error or not hits:
            return f"I can't find anything earlier in this conversation about {topic}."
        parts = []
        for seq, who, snippet in hits[:2]:
            speaker = {"user": "you said", "assistant": "I said"}.get(who, f"the {who} was")
            snippet = " ".join(snippet.split())
            if len(snippet) > 240:
                snippet = snippet[:240].rsplit(" ", 1)[0] + "…"
            parts.append(f"In message {seq}, {speaker}: “{snippet}”")
        return " ".join(parts)
    return speak


_SAID_AT = re.compile(r"^#(\d+) \([^),]+, (\w{3} \d{1,2} \w{3}(?: \d{4})?) (\d\d:\d\d)\): (.*)$",
                      re.MULTILINE)


def spoken_day(day: str, today: date) -> str:
    """"Sat 5 Dec" (or "Sat 5 Dec 2025") as said aloud: "today", "yesterday", "on
    Saturday, December 5" (with the year when it is not this year's)."""
    parts = day.split()
    year = int(parts[3]) if len(parts) == 4 else today.year
    said = datetime.strptime(f"{parts[1]} {parts[2]} {year}", "%d %b %Y").date()
    if said == today:
        return "today"
    if said == today - timedelta(days=1):
        return "yesterday"
    return f"on {said:%A}, {said:%B} {said.day}" + (f", {year}" if year != today.year else "")


def _spoken_when(topic: str, today: Callable[[], date] = date.today
                 ) -> Callable[[str, bool], str]:
    def speak(result: str, is_error: bool) -> str:
        found = _SAID_AT.search(result)
        if is_error or found is None:
            return f"I can't find anything earlier in this conversation about {topic}."
        seq, day, time, snippet = found.groups()
        snippet = " ".join(snippet.split())
        if len(snippet) > 160:
            snippet = snippet[:160].rsplit(" ", 1)[0] + "…"
        return (f"You mentioned it {spoken_day(day, today())} at {time}, in message {seq}: "
                f"“{snippet}”")
    return speak


class LocalIntents:
    """Answers the everyday requests without the model; one per conversation (it remembers
    a question it asked, such as a timer's length)."""

    def __init__(self, matcher: IntentMatcher | None = None) -> None:
        self.matcher = matcher or IntentMatcher()
        self._pending_timer: str | None = None
        """A timer was asked for without a length: its name, while "for how long?" waits."""

    def answer(self, text: str, last_reply: str | None = None) -> LocalAnswer | None:
        pending, self._pending_timer = self._pending_timer, None
        if pending is not None:
            for match in self.matcher.match(f"set a timer for {text}"):
                if match.intent == "HassStartTimer":
                    return self._start_timer(dict(match.slots, name=match.slots.get("name")
                                                  or pending))
        for match in self.matcher.match(text):
            answer = self._answer(match, last_reply)
            if answer is not None:
                return answer
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
