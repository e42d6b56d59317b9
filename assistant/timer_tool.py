"""The `timer` tool: local intents and the model set, check and cancel the same timers.

Its results are sentences meant to be said as they are: a local answer speaks them, and a
model reads them; their value is the timers the action concerned.
"""

from __future__ import annotations

from collections.abc import Callable

from assistant.timers import Timer, TimerError, Timers, duration_words
from assistant.tools import Tool, ToolOutput, ToolRefused
from models.base import ToolSpec

NAME = "timer"
ACTIONS = ("start", "cancel", "cancel_all", "status", "pause", "resume", "add", "remove")
SPEC = ToolSpec(
    NAME,
    "Set, check, pause, resume, change or cancel the user's timers and reminders. "
    "Starting one needs its length in seconds (ten minutes is 600) and may name it.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "seconds": {"type": "integer",
                        "description": "The duration to start, or the time to add or remove."},
            "name": {"type": "string", "description": "The timer's name, e.g. pizza."},
            "set_for": {"type": "integer",
                        "description": "Pick the timer that was set for this many seconds."},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
)


def _left(timer: Timer, timers: Timers) -> str:
    text = _left_words(timer.left(timers.clock()))
    return f"{text} left" + (", paused" if timer.paused_left is not None else "")


def _left_words(left: float) -> str:
    """Time left, said: never "0 seconds" while some is left."""
    return duration_words(max(1, round(left)) if left < 60 else round(left))


def _finished_by_removing(timer: Timer, seconds: int, left: float) -> str:
    """Removing at least the time left finished the timer: said plainly, not "1 second
    left" before it rings."""
    how = (f"That's more than the {_left_words(left)} left" if seconds > round(left)
           else "That's all the time it had left")
    return f"{how}: your {timer.description} is done."


def _listing(found: list[Timer]) -> str:
    names = [f"the {t.description}" for t in found]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def timer_tool(timers: Timers) -> Tool:
    def pick(arguments: dict) -> Timer:
        name = str(arguments.get("name") or "")
        set_for = arguments.get("set_for")
        found = timers.find(name, set_for)
        if not found:
            if not timers.running():
                raise TimerError("There is no timer running.")
            what = f"{name} timer" if name else (
                f"{duration_words(set_for, adjective=True)} timer" if set_for else "timer")
            raise TimerError(f"There is no {what}. You have {_listing(timers.running())}.")
        if len(found) > 1:
            raise TimerError(f"You have {len(found)} timers: {_listing(found)}. "
                             "Say which one, by its name or its length.")
        return found[0]

    def act(arguments: dict) -> tuple[str, list[Timer]]:
        """What is said, and the timers the action concerned."""
        action = arguments["action"]
        if action not in ACTIONS:
            raise TimerError(f"Unknown timer action {action!r}; use one of {', '.join(ACTIONS)}.")
        seconds = arguments.get("seconds")
        if action == "start":
            timer = timers.start(seconds or 0, str(arguments.get("name") or ""))
            return f"Your {timer.description} is set.", [timer]
        if action == "cancel_all":
            running = timers.running()
            for timer in running:
                timers.cancel(timer)
            if not running:
                return "There is no timer running.", []
            return (f"Cancelled {len(running)} timers." if len(running) > 1 else
                    f"Cancelled your {running[0].description}."), running
        if action == "status":
            found = timers.find(str(arguments.get("name") or ""), arguments.get("set_for"))
            if not found:
                return ("There is no timer running." if not timers.running() else
                        f"There is no such timer. You have {_listing(timers.running())}."), []
            if len(found) == 1:
                return f"Your {found[0].description} has {_left(found[0], timers)}.", found
            parts = [f"the {t.description} has {_left(t, timers)}" for t in found]
            return f"You have {len(found)} timers: " + "; ".join(parts) + ".", found
        timer = pick(arguments)
        if action == "cancel":
            timers.cancel(timer)
            return f"Cancelled your {timer.description}.", [timer]
        if action == "pause":
            timers.pause(timer)
            left = duration_words(round(timer.left(timers.clock())))
            return f"Paused your {timer.description} with {left} left.", [timer]
        if action == "resume":
            timers.resume(timer)
            return f"Resumed your {timer.description}: {_left(timer, timers)}.", [timer]
        if not seconds:
            raise TimerError("Say how much time to add or remove, for example one minute.")
        left = timers.change(timer, seconds if action == "add" else -seconds)
        if timer.finished:
            return _finished_by_removing(timer, seconds, left), [timer]
        verb = "Added" if action == "add" else "Removed"
        side = "to" if action == "add" else "from"
        return (f"{verb} {duration_words(seconds)} {side} your {timer.description}: "
                f"{_left(timer, timers)}."), [timer]

    def run(arguments: dict) -> ToolOutput:
        text, concerned = act(arguments)
        return ToolOutput(text, tuple(concerned))

    def label(arguments: dict) -> str:
        action = arguments.get("action", "")
        if action == "start":
            seconds = arguments.get("seconds") or 0
            name = str(arguments.get("name") or "").strip()
            named = f" {name}" if name else ""
            return f"Setting a {duration_words(seconds, adjective=True)}{named} timer"
        return {"status": "Checking the timers", "cancel_all": "Cancelling all timers"}.get(
            action, f"Timer: {action}")

    def take_back(arguments: dict) -> Callable[[ToolOutput], None] | None:
        """A timer just started is cancelled as if never set; other actions stay."""
        if arguments.get("action") != "start":
            return None
        return lambda output: [timers.cancel(timer) for timer in output.value]

    return Tool(SPEC, run, label, take_back=take_back)


def timers_unavailable(reason: str) -> Tool:
    """The `timer` tool where no timer could ring (a server's client hears nothing
    later): every request is refused with `reason`, rather than a timer set in silence."""
    def run(arguments: dict) -> ToolOutput:
        raise ToolRefused(reason)

    return Tool(SPEC, run, lambda arguments: "Timers")
