"""Which built-in tools a request is offered: only those it could need.

A small model offered a clock, a calculator and a timer calls one for questions that need
none: Qwen2.5-Coder-0.5B, asked how to read a docker container's logs or for a good name
for a cat, answered with a timer or clock call. Everyday requests for the time, a timer or
a sum are answered by the local intents before the model; what reaches the model with
such a need still names it in words (a time, a number, a duration, a reminder), so a tool
is offered only when the request has such words. Tools Parley does not know (a user's
own, registered in the `ToolRegistry`) and the conversation_history tool are always
offered.
"""

from __future__ import annotations

import re

from assistant.tools import ToolRegistry

_NUMBER_WORDS = (
    r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|hundred|thousand|million|billion|half|quarter|dozen"
)
_NEEDS = {
    "clock": re.compile(
        r"\b(time|date|day|days|today|tonight|tomorrow|yesterday|week|weekend|month|year|"
        r"clock|hour|hours|o'clock|now|when|until|till|since|ago|late|early|morning|"
        r"afternoon|evening|midnight|noon|monday|tuesday|wednesday|thursday|friday|"
        r"saturday|sunday|calendar|weekday|am|pm)\b", re.IGNORECASE),
    "calculator": re.compile(
        r"\d|[+*/^=%×÷]|\b(" + _NUMBER_WORDS + r"|plus|minus|times|divided|multiplied|"
        r"percent|percentage|sum|total|average|square|root|calculate|compute|math|"
        r"how many|how much)\b", re.IGNORECASE),
    "timer": re.compile(
        r"\b(timer|timers|remind|reminder|alarm|countdown|count down|wake me|minute|"
        r"minutes|second|seconds|hour|hours|pause|resume|cancel|stop the|left on)\b",
        re.IGNORECASE),
}
"""Words that show a request could need a built-in tool (generous: a tool offered for
nothing costs a few prompt tokens, one missing costs a wrong answer)."""


def could_need(tool_name: str, request: str) -> bool:
    """Whether `request` could need the tool: always for a tool Parley does not know."""
    needs = _NEEDS.get(tool_name)
    return needs is None or bool(needs.search(request))


def offered_for(request: str, tools: ToolRegistry) -> ToolRegistry:
    """The tools of `tools` the request could need, in the same order."""
    return ToolRegistry([tool for tool in tools.tools() if could_need(tool.spec.name, request)])
