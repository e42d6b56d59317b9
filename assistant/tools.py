"""The tool registry, Parley's one extension point, and the built-in tools."""

from __future__ import annotations

import ast
import dataclasses
import logging
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from functools import partial
from typing import Any

from assistant.confirmation import Answer, Approve, Confirmation
from models.base import ToolSpec

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 4000
RESULT_CUT_NOTE = "\n[…the rest of this result was cut: results are at most 4,000 characters]"


class ToolRefused(ValueError):
    """A request a tool cannot do ("there is no timer running"); its message is a sentence
    for the user, the result as it is, marked as an error."""


class Failure(Enum):
    """Why a tool call gave no result."""

    UNKNOWN_TOOL = "unknown-tool"
    BAD_ARGUMENTS = "bad-arguments"
    """The arguments break the tool's schema."""
    UNREADABLE_CALL = "unreadable-call"
    """The model's call could not be read."""
    REFUSED = "refused"
    """The tool said no (`ToolRefused`): its message is a sentence for the user."""
    RAISED = "raised"
    """The tool raised an exception (`cause`)."""


@dataclass(frozen=True)
class ToolError:
    """A failed call: what kind of failure, and the sentence the model reads after "Error: "."""

    kind: Failure
    message: str
    cause: Exception | None = field(default=None, compare=False)
    """The exception the tool raised, for code that tells failures apart by type (a
    division by zero)."""


@dataclass(frozen=True)
class ToolOutput:
    """What a tool call gives: the text the model reads (and the history keeps), and the
    value code uses. Code reacts to `value` and `error`, never to the text."""

    text: str
    value: Any = None
    """The structured result: the clock's datetime, the calculator's number, the timers a
    timer action concerned, the passages a history search shows."""
    error: ToolError | None = None
    """Set when the call failed; `text` then says so to the model ("Error: …")."""

    @property
    def is_error(self) -> bool:
        return self.error is not None


def failed(kind: Failure, message: str, cause: Exception | None = None) -> ToolOutput:
    """A failed call's output: the model reads "Error: " and `message` (capped: a message
    can quote a server's schema or the model's own arguments)."""
    return ToolOutput(capped(f"Error: {message}"), error=ToolError(kind, message, cause))


def capped(text: str) -> str:
    """A result as the model reads it: at most `MAX_RESULT_CHARS`, the note counted in."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[:MAX_RESULT_CHARS - len(RESULT_CUT_NOTE)] + RESULT_CUT_NOTE


ToolRun = Callable[[dict], "ToolOutput | str"]
"""How a tool runs: its arguments in, its output out (text alone is an output whose value is
that text); it may raise (see `ToolRegistry.call`)."""


@dataclass(frozen=True)
class Tool:
    """A tool: what the model sees (`spec`), how to run it and how to label the step."""

    spec: ToolSpec
    run: ToolRun
    label: Callable[[dict], str]
    read_only: bool = False
    """It changes nothing (a clock, a calculator): safe to run for a reply that may be
    dropped. Tools are assumed to change something unless they say so."""
    approval: Callable[[dict], Confirmation] | None = None
    """For a tool that runs only after the user's yes (`assistant.confirmation`): the
    question its arguments make. The reply asks it, through whoever can answer
    (`ToolRegistry.call`'s `approve`), before the tool runs."""
    check: Callable[[dict], str | None] | None = None
    """Checks the arguments against the tool's whole input schema (an MCP tool's); the
    few rules of `check_arguments` otherwise."""
    source: str = ""
    """Where it comes from: an MCP server's name, "" for Parley's own."""
    take_back: Callable[[dict], Callable[[ToolOutput], None] | None] | None = None
    """For a call that can be undone without a trace (a timer just started: cancelled),
    what undoes it, given what it returned; None for a call that cannot be. A voice turn
    the user may still go on with runs such a call at once, and undoes it if they do."""

    @property
    def asks_first(self) -> bool:
        return self.approval is not None


Guard = Callable[[Tool, ToolRun], ToolRun]
"""Makes a tool's run wait, or refuse, until the reply may change something (a voice
reply the user may still take back, a reply answered ahead)."""


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None,
                 guards: tuple[Guard, ...] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._guards = guards
        """Wrapped around the run of each tool that changes something, innermost first."""
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        # A new dict, never one changed in place: MCP tools arrive and leave from another
        # thread while a reply lists the tools.
        self._tools = {**self._tools, tool.spec.name: tool}

    def withdraw(self, names: set[str]) -> None:
        """Remove these tools (an MCP server's, once it failed)."""
        self._tools = {name: tool for name, tool in self._tools.items() if name not in names}

    def names(self) -> set[str]:
        return set(self._tools)

    def with_tool(self, tool: Tool) -> ToolRegistry:
        """A copy with one more tool (a reply's own conversation_history)."""
        copy = self.copy()
        copy.register(tool)
        return copy

    @property
    def guards(self) -> tuple[Guard, ...]:
        return self._guards

    def copy(self) -> ToolRegistry:
        """The same tools, and guards, in a new registry."""
        return ToolRegistry(list(self._tools.values()), self._guards)

    def guarded(self, guard: Guard) -> ToolRegistry:
        """A copy whose tools that change something run as `guard` makes them run (a
        speculative reply's: only once the turn is confirmed), before their question is
        asked; the model sees the same tools."""
        return ToolRegistry(list(self._tools.values()), (*self._guards, guard))

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def label(self, name: str, arguments: dict) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return f"Calling unknown tool {name!r}"
        try:
            return tool.label(arguments)
        except Exception:  # a label must never break a reply (tools are an extension point)
            log.debug("the label of tool %s failed", name, exc_info=True)
            return f"Using {name}"

    def call(self, name: str, arguments: dict, approve: Approve | None = None) -> ToolOutput:
        """Run a tool. Never raises: a failure is an output whose text tells the model.

        A tool that asks first runs only if `approve` (whoever can answer, where Parley
        runs) says yes to its question; without one, it does not run. A tool may return
        its text alone (a `str`): its value is then that text.
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return failed(Failure.UNKNOWN_TOOL,
                          f"there is no tool named {name!r}. Tools: {known}.")
        try:
            problem = (tool.check or partial(check_arguments, tool.spec.parameters))(arguments)
        except Exception as exc:  # a server's schema the checker cannot use
            log.debug("the arguments of tool %s could not be checked", name, exc_info=True)
            problem = f"its arguments could not be checked ({exc}); nothing was run"
        if problem:
            return failed(Failure.BAD_ARGUMENTS, problem)
        run = _approved(tool, approve)
        if not tool.read_only:
            for guard in self._guards:
                run = guard(tool, run)
        try:
            output = run(arguments)
        except ToolRefused as exc:
            return failed(Failure.REFUSED, str(exc), exc)
        except Exception as exc:  # any tool's failure is a result the model reads
            log.debug("tool %s failed", name, exc_info=True)
            return failed(Failure.RAISED, f"{name} failed: {exc}", exc)
        if isinstance(output, str):
            output = ToolOutput(output, output)
        if len(output.text) > MAX_RESULT_CHARS:
            output = dataclasses.replace(output, text=capped(output.text))
        return output


def _approved(tool: Tool, approve: Approve | None) -> ToolRun:
    """`tool`'s run, behind its question if it asks first."""
    question = tool.approval
    if question is None:
        return tool.run

    def asked(arguments: dict) -> ToolOutput | str:
        request = question(arguments)
        try:
            answer = approve(request) if approve is not None else NO_ONE_TO_ASK
        except Exception:  # asking failed (a device gone): the change is not made
            log.exception("asking the user to confirm %s failed", request.tool)
            answer = Answer(False, "the user could not be asked")
        if not answer.allowed:
            raise ToolRefused(f"{answer.why}: {request.server_tool} was not run and nothing "
                              "changed. Tell the user, without a tool.")
        return tool.run(arguments)

    return asked


NO_ONE_TO_ASK = Answer(False, "no one can be asked here")


_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
               "object": dict, "array": list}


def check_arguments(schema: dict, arguments: dict) -> str | None:
    """The few JSON-schema rules tools use: required keys and property types."""
    for key in schema.get("required", []):
        if key not in arguments:
            return f"missing argument {key!r}"
    properties = schema.get("properties", {})
    for key, value in arguments.items():
        if key not in properties:
            if schema.get("additionalProperties", True) is False:
                return f"unknown argument {key!r}"
            continue
        expected = _JSON_TYPES.get(properties[key].get("type", ""))
        if expected and (not isinstance(value, expected) or
                         (isinstance(value, bool) and expected is not bool)):
            return f"argument {key!r} must be of type {properties[key]['type']}"
    return None


def clock_text(now: datetime) -> str:
    """What the model reads of the clock's reading."""
    return (f"{now:%A, %d %B %Y}, {now:%H:%M:%S}, time zone {now.tzname()} "
            f"(UTC{now:%z})")


def _clock(_: dict) -> ToolOutput:
    now = datetime.now().astimezone()
    return ToolOutput(clock_text(now), now)


_OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "log": math.log, "log10": math.log10, "exp": math.exp,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def evaluate(expression: str) -> float | int:
    """Arithmetic through the `ast` module; anything but numbers and operators is refused."""

    def walk(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 1000:
                raise ValueError("exponent too large")
            return _OPERATORS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _FUNCTIONS and not node.keywords):
            return _FUNCTIONS[node.func.id](*[walk(arg) for arg in node.args])
        raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")

    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot read {expression!r} as arithmetic") from exc
    return walk(tree)


def _calculate(arguments: dict) -> ToolOutput:
    value = evaluate(arguments["expression"])
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return ToolOutput(f"{arguments['expression']} = {value}", value)


CLOCK = Tool(
    ToolSpec("clock", "The current date, time, weekday and time zone.",
             {"type": "object", "properties": {}}),
    _clock,
    lambda _: "Checking the clock",
    read_only=True,
)
CALCULATOR = Tool(
    ToolSpec("calculator", "Evaluate arithmetic, e.g. (17 * 3) / 4 or sqrt(2).",
             {"type": "object", "properties": {"expression": {"type": "string"}},
              "required": ["expression"]}),
    _calculate,
    lambda args: f"Calculating {args.get('expression', '')}",
    read_only=True,
)


def builtin_tools() -> ToolRegistry:
    return ToolRegistry([CLOCK, CALCULATOR])
