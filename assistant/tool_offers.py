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

import json
import re

from assistant.confirmation import Approve
from assistant.tools import Failure, Guard, ToolOutput, ToolRegistry, failed

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


def offered_for(request: str, tools: ToolRegistry, only_needed: bool = True) -> ToolRegistry:
    """The tools of `tools` the request could need (all of them unless `only_needed`), in
    the same order, doing only the changes it asks for (`RequestTools`)."""
    return RequestTools([tool for tool in tools.tools()
                         if not only_needed or could_need(tool.spec.name, request)], request,
                        tools.guards)


_TIMER_ACTIONS = {
    "start": re.compile(r"\b(timer|remind|reminder|alarm|countdown|count down|wake me|start|"
                        r"set|in \S+ (seconds?|minutes?|hours?))\b", re.IGNORECASE),
    "cancel": re.compile(r"\b(cancel|stop|delete|remove|clear|end|turn off|never mind|"
                         r"no longer)\b", re.IGNORECASE),
    "pause": re.compile(r"\b(pause|hold|freeze)\b", re.IGNORECASE),
    "resume": re.compile(r"\b(resume|continue|unpause|restart|start again)\b", re.IGNORECASE),
    "add": re.compile(r"\b(add|more|extra|extend|longer|another)\b", re.IGNORECASE),
    "remove": re.compile(r"\b(remove|less|subtract|shorten|shorter|take off)\b", re.IGNORECASE),
}
_TIMER_ACTIONS["cancel_all"] = _TIMER_ACTIONS["cancel"]
ASKED_FOR = {"timer": _TIMER_ACTIONS}
"""For a tool that changes something: the words that ask for each of its actions. A small
model that has set a timer goes on checking, pausing and cancelling it (Qwen2.5-Coder-0.5B,
asked to be reminded in 10 minutes, started the timer then cancelled it three calls later);
an action the request does not ask for is refused, and the model told to answer."""


SAYS_RESULT = {"timer"}
"""Tools whose results are sentences to say as they are (`assistant.timer_tool`)."""


def change_said(tools: ToolRegistry, said_so_far: str) -> str:
    """What a reply says once its change is made ("" if it made none): the change's result,
    for a tool whose results are sentences. The reply then ends: the small model went on
    calling the timer after it was set, and wrote an empty or JSON answer when stopped."""
    if not isinstance(tools, RequestTools) or tools.changed is None:
        return ""
    if tools.changed_by not in SAYS_RESULT:
        return ""
    text = tools.changed.text
    return f" {text}" if said_so_far and not said_so_far[-1].isspace() else text


class RequestTools(ToolRegistry):
    """One reply's tools: an action that changes something runs only if the request asks
    for it (`ASKED_FOR`), and once a change is done no other is made in the same reply
    (the same small model started the same timer four times over). Checking (a timer's
    status) and the read-only tools run as asked."""

    def __init__(self, tools: list, request: str, guards: tuple[Guard, ...] = ()) -> None:
        super().__init__(tools, guards)
        self.request = request
        self.changed: ToolOutput | None = None
        """The result of the change this reply made, if it made one…"""
        self.changed_by = ""
        """…and the tool that made it."""
        self.made: set[str] = set()
        """The calls made (name and arguments): one made again is not run. Qwen2.5-Coder-
        0.5B asked the time server for Tokyo's time four times in one reply, then wrote the
        result's JSON as its answer."""

    def copy(self) -> RequestTools:
        copy = RequestTools(self.tools(), self.request, self.guards)
        copy.changed, copy.changed_by = self.changed, self.changed_by
        copy.made = self.made
        return copy

    def call(self, name: str, arguments: dict, approve: Approve | None = None) -> ToolOutput:
        key = json.dumps([name, arguments], sort_keys=True, default=str)
        if key in self.made:
            return failed(Failure.REFUSED, f"{name} was called with these arguments already; "
                          "its result is above. Answer the user now from it, in plain words, "
                          "without a tool.")
        self.made.add(key)
        tool = next((t for t in self.tools() if t.spec.name == name), None)
        if tool is None or tool.read_only or tool.asks_first:
            # A tool that asks first is the user's to allow, each time: several changes
            # in one reply (two notes deleted) are theirs to say yes to.
            return super().call(name, arguments, approve)
        action = arguments.get("action")
        asks = ASKED_FOR.get(name, {}).get(action) if isinstance(action, str) else None
        if action != "status" and self.changed is not None:
            return failed(Failure.REFUSED, f"done already: “{self.changed.text}” Nothing "
                          "more was changed. Tell the user that, without a tool.")
        if asks is not None and not asks.search(self.request):
            return failed(Failure.REFUSED, f"the user did not ask for {name} action {action!r}; "
                          "nothing was changed. Answer the user now, without a tool.")
        output = super().call(name, arguments, approve)
        if not output.is_error and action != "status":
            self.changed, self.changed_by = output, name
        return output
