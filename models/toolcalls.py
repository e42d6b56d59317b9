"""Tools described in the prompt, and the tool calls models write in their text.

Models write calls in several forms, whatever their chat template asks for:

- tags: Hermes and Qwen, `<tool_call>{"name": …, "arguments": {…}}</tool_call>`;
- python_tag: Llama 3.x, `<|python_tag|>{"name": …, "parameters": {…}}`;
- mistral: `[TOOL_CALLS] [{"name": …, "arguments": {…}}, …]`;
- fenced: a ```json (or bare ```) block holding a call object or a list of them;
- bare: a reply that opens with a call object, as Llama 3.x without its tag and small
  models (Qwen2.5-Coder-0.5B writes nothing else) do;
- flat, in any of these: `{"name": "timer", "action": "start", "seconds": 600}`, the
  arguments beside the name, read only for an offered tool and its own parameters.

The first three are unmistakably calls: what follows their marker is a call or an error.
A fenced or bare JSON value is a call only when it looks like one: an object (or a list of
them) with a "name" and "arguments" or "parameters", and nothing else but "type" and "id".
Any other JSON (a code example the user asked for) stays text.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence

from models.base import TextChunk, ToolCallChunk, ToolSpec
from models.jsonspan import JsonSpan

OPEN, CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
MISTRAL_CALLS = "[TOOL_CALLS]"
FENCE = "```"

ALL_FORMS = frozenset({"tags", "python_tag", "mistral", "fenced", "bare"})
DEFAULT_FORMS: Collection[str] = ALL_FORMS
"""The forms a scanner reads unless told otherwise (`("tags",)` reads Parley's original
`<tool_call>` blocks only)."""

_MARKERS = {"tags": OPEN, "python_tag": PYTHON_TAG, "mistral": MISTRAL_CALLS, "fenced": FENCE}
_CALL_FENCES = ("", "json", "tool_call", "tool_code")
"""Fence languages whose block may hold a call; any other (python, bash, yaml) is code."""
_CALL_KEYS = {"name", "arguments", "parameters", "type", "id"}


def describe_tools(tools: Sequence[ToolSpec]) -> str:
    """Tool instructions for a model whose chat template has no tool support."""
    lines = [
        "You can use tools. To call one, answer with only this, on one line:",
        f'{OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CLOSE}',
        "The result comes back in the next message. Available tools:",
    ]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description} Arguments: {json.dumps(tool.parameters)}")
    return "\n".join(lines)


def render_call(name: str, arguments: dict | None) -> str:
    return f"{OPEN}{json.dumps({'name': name, 'arguments': arguments or {}})}{CLOSE}"


_TOO_BIG = "the tool call is not valid JSON (a number with too many digits, or nesting too deep)"


def _loads(text: str) -> tuple[object, str | None]:
    """The JSON value of `text`, or the reason it is not one."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"the tool call is not valid JSON ({exc.msg})"
    except (ValueError, RecursionError):  # Python's own limits, not a syntax error
        return None, _TOO_BIG


def call_from(data: object, tools: Sequence[ToolSpec] = ()) -> ToolCallChunk:
    """One call from a decoded object; a chunk carrying the error if it is not one.
    OpenAI's wrapped form, {"type": "function", "function": {…}}, is read too, and the flat
    one small models write, {"name": "timer", "action": "start"}, for a tool in `tools`."""
    if isinstance(data, dict) and isinstance(data.get("function"), dict):
        data = data["function"]
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCallChunk("", {}, 'a tool call needs {"name": "...", "arguments": {...}}')
    if _flat_call_of(data, tools):
        return ToolCallChunk(data["name"], {k: v for k, v in data.items()
                                            if k not in ("name", "type", "id")})
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        arguments, problem = _loads(arguments) if arguments.strip() else ({}, None)
        if problem:
            return ToolCallChunk(data["name"], {}, "the tool call's arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCallChunk(data["name"], {}, "the tool call's arguments must be an object")
    return ToolCallChunk(data["name"], arguments)


def _flat_call_of(item: dict, tools: Sequence[ToolSpec]) -> bool:
    """Whether `item` names one of `tools` and holds its arguments beside the name."""
    if "arguments" in item or "parameters" in item:
        return False
    spec = next((t for t in tools if t.name == item.get("name")), None)
    if spec is None:
        return False
    known = set(spec.parameters.get("properties", {}))
    return set(item) - {"name", "type", "id"} <= known


def parse_calls(body: str, tools: Sequence[ToolSpec] = ()) -> list[ToolCallChunk]:
    """The calls in a marked call's text (one object or a list of them); a malformed call
    becomes a chunk carrying the error. A missing closing brace is added."""
    body = _unfenced(body.strip())
    data, problem = _loads(body)
    if problem and body[:1] in "{[":
        span = JsonSpan()
        if span.advance(body) is None:
            repaired, still = _loads(body + span.completion())
            if not still:
                data, problem = repaired, None
    if problem:
        return [ToolCallChunk("", {}, problem)]
    items = data if isinstance(data, list) else [data]
    return ([call_from(item, tools) for item in items]
            or [ToolCallChunk("", {}, "empty tool call")])


def parse_call(body: str) -> ToolCallChunk:
    """Read one call's JSON; a malformed call becomes a chunk carrying the error."""
    return parse_calls(body)[0]


def _unfenced(body: str) -> str:
    """A call's JSON without the code fence some models wrap it in inside the tags."""
    if body.startswith(FENCE) and body.endswith(FENCE) and len(body) > 6:
        return body[3:-3].strip().removeprefix("json").strip()
    return body


def looks_like_calls(data: object, tools: Sequence[ToolSpec] = ()) -> bool:
    """Whether unmarked JSON is a call (or a list of calls) rather than data."""
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(_looks_like_call(item, tools) for item in items)


def _looks_like_call(item: object, tools: Sequence[ToolSpec]) -> bool:
    if isinstance(item, dict) and set(item) <= {"type", "id", "function"} \
            and isinstance(item.get("function"), dict):
        item = item["function"]
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return False
    return _flat_call_of(item, tools) or (
        bool(item["name"].strip()) and set(item) <= _CALL_KEYS
        and ("arguments" in item or "parameters" in item))


class ToolCallScanner:
    """Splits streamed text into plain text and tool calls, in every form `forms` names.

    Text that might be the start of a call (a partial marker, an open fence, a reply's
    opening brace) is held back until it is known not to be, so the user never sees half
    a call; everything else goes out as soon as it arrives.
    """

    def __init__(self, forms: Collection[str] | None = None,
                 tools: Sequence[ToolSpec] = ()) -> None:
        """`tools`: the tools offered, whose calls may also come in the flat form."""
        self._tools = tuple(tools)
        self._forms = frozenset(DEFAULT_FORMS if forms is None else forms)
        unknown = self._forms - ALL_FORMS
        if unknown:
            raise ValueError(f"unknown tool call forms: {', '.join(sorted(unknown))}")
        self._markers = [m for form, m in _MARKERS.items() if form in self._forms]
        self._explicit = [m for m in self._markers if m != FENCE]
        """Markers that make a call wherever they are, inside held JSON or code too."""
        self._buffer = ""
        self._mode = "text"
        """text, tag (inside <tool_call>), marked (JSON after a marker), header (a fence's
        first line), fenced (JSON in a fence), bare (JSON opening the reply), code (inside
        a fence that is not a call)."""
        self._started = False
        """Something besides white space has been said: a bare object is no longer a call."""
        self._span: JsonSpan | None = None
        self._at = 0
        """Where the JSON being read starts in the buffer (fenced and bare modes)."""

    def feed(self, text: str) -> Iterator[TextChunk | ToolCallChunk]:
        self._buffer += text
        yield from self._scan(final=False)

    def finish(self) -> Iterator[TextChunk | ToolCallChunk]:
        yield from self._scan(final=True)
        self._buffer, self._mode, self._span = "", "text", None

    # -- the modes -------------------------------------------------------------------
    def _scan(self, final: bool) -> Iterator[TextChunk | ToolCallChunk]:
        while True:
            step = getattr(self, f"_{self._mode}")
            out: list[TextChunk | ToolCallChunk] = []
            progressed = step(out, final)
            yield from out
            if not progressed:
                return

    def _say(self, out: list, text: str) -> None:
        if text:
            out.append(TextChunk(text))
            self._started = self._started or bool(text.strip())

    def _switch(self, mode: str, drop: int) -> bool:
        self._buffer = self._buffer[drop:]
        self._mode, self._span, self._at = mode, None, 0
        return True

    def _calls_in(self, data: object) -> list[ToolCallChunk]:
        return [call_from(item, self._tools) for item in
                (data if isinstance(data, list) else [data])]

    def _marker_inside(self, out: list, before: int | None = None) -> bool:
        """A marked call started inside what was held (unmarked JSON, code; before the
        held JSON's end, if it has one): what came before it is text, and the call is read."""
        found = [(self._buffer.find(m), m) for m in self._explicit if m in self._buffer]
        if not found or (before is not None and min(found)[0] >= before):
            return False
        start, marker = min(found)
        self._say(out, self._buffer[:start])
        return self._switch("tag" if marker == OPEN else "marked", start + len(marker))

    def _text(self, out: list, final: bool) -> bool:
        buffer = self._buffer
        if not self._started and "bare" in self._forms:
            opening = buffer.lstrip()
            if not opening:
                if final:
                    self._say(out, buffer)
                    self._buffer = ""
                return False
            if opening[0] == "{":
                self._mode, self._span = "bare", JsonSpan()
                self._at = len(buffer) - len(opening)
                return True
        found = [(buffer.find(m), m) for m in self._markers if m in buffer]
        if found:
            start, marker = min(found)
            self._say(out, buffer[:start])
            if marker == FENCE:
                return self._switch("header", start)
            if marker == OPEN:
                return self._switch("tag", start + len(marker))
            return self._switch("marked", start + len(marker))
        keep = 0 if final else _partial_marker_length(buffer, self._markers)
        self._say(out, buffer[:len(buffer) - keep])
        self._buffer = buffer[len(buffer) - keep:]
        return False

    def _tag(self, out: list, final: bool) -> bool:
        end = self._buffer.find(CLOSE)
        if end < 0 and not final:
            return False
        body = self._buffer if end < 0 else self._buffer[:end]
        # An unclosed call is taken if its JSON is complete.
        out.extend(parse_calls(body, self._tools))
        self._started = True
        return self._switch("text", len(self._buffer) if end < 0 else end + len(CLOSE))

    def _marked(self, out: list, final: bool) -> bool:
        """The JSON after <|python_tag|> or [TOOL_CALLS]: a call, or an error."""
        body = self._buffer.lstrip()
        skipped = len(self._buffer) - len(body)
        if body[:1] not in ("{", "["):
            if not body and not final:
                return False
            if body and not final:  # code, not JSON (Llama's built-in python calls)
                return False  # read to the end, then reported once
            self._started = True
            out.append(ToolCallChunk("", {}, "the tool call is not JSON" if body
                                     else "empty tool call"))
            return self._switch("text", len(self._buffer))
        span = self._span or JsonSpan()
        self._span = span
        end = span.advance(body)
        if end is None and not final:
            return False
        end = len(body) if end is None else end
        out.extend(parse_calls(body[:end], self._tools))
        self._started = True
        return self._switch("text", skipped + end)

    def _header(self, out: list, final: bool) -> bool:
        """A fence's first line: a language that may hold a call, then the body's first
        character, decide whether the block is read as a possible call."""
        newline = self._buffer.find("\n")
        line = self._buffer[len(FENCE):] if newline < 0 else self._buffer[len(FENCE):newline]
        inline = line.find(FENCE)
        if inline >= 0:  # ```a span``` on one line: text
            self._say(out, self._buffer[:len(FENCE) + inline + len(FENCE)])
            return self._switch("text", len(FENCE) + inline + len(FENCE))
        language = line.strip().lower()
        if newline < 0:
            if final or not any(fence.startswith(language) for fence in _CALL_FENCES):
                return self._to_code(out, len(self._buffer) - (
                    0 if final else _partial_marker_length(self._buffer, [FENCE])))
            return False
        if language not in _CALL_FENCES:
            return self._to_code(out, newline + 1)
        body = self._buffer[newline + 1:]
        first = body.lstrip()[:1]
        if not first:
            return self._to_code(out, len(self._buffer)) if final else False
        if first not in ("{", "["):
            return self._to_code(out, newline + 1)
        self._mode, self._span = "fenced", JsonSpan()
        self._at = len(self._buffer) - len(body.lstrip())
        return True

    def _to_code(self, out: list, upto: int) -> bool:
        self._say(out, self._buffer[:upto])
        return self._switch("code", upto)

    def _fenced(self, out: list, final: bool) -> bool:
        value = self._buffer[self._at:]
        end = self._span.advance(value)
        if self._marker_inside(out, None if end is None else self._at + end):
            return True
        if end is None:
            return self._unfinished(out, value) if final else False
        after = value[end:]
        rest = after.lstrip()
        closing = len(rest) < len(FENCE) and FENCE.startswith(rest)
        if closing and not final:
            return False
        if not (rest.startswith(FENCE) or closing):  # more than one value: code
            return self._to_code(out, self._at + end)
        consumed = min(len(self._buffer), self._at + end + (len(after) - len(rest)) + len(FENCE))
        return self._whole_value(out, value[:end], consumed)

    def _bare(self, out: list, final: bool) -> bool:
        value = self._buffer[self._at:]
        end = self._span.advance(value)
        if self._marker_inside(out, None if end is None else self._at + end):
            return True
        if end is None:
            return self._unfinished(out, value) if final else False
        return self._whole_value(out, value[:end], self._at + end)

    def _whole_value(self, out: list, value: str, upto: int) -> bool:
        """A whole unmarked JSON value, ending (with its fence) at `upto`: the calls it
        holds, or else the text it was; then text again."""
        data, problem = _loads(value)
        if problem or not looks_like_calls(data, self._tools):
            self._say(out, self._buffer[:upto])
        else:
            out.extend(self._calls_in(data))
            self._started = True
        return self._switch("text", upto)

    def _unfinished(self, out: list, value: str) -> bool:
        """The reply ended inside unmarked JSON: a call if closing it makes one, else text."""
        data, problem = _loads(value + self._span.completion())
        if not problem and looks_like_calls(data, self._tools):
            out.extend(self._calls_in(data))
            self._started = True
        else:
            self._say(out, self._buffer)
        return self._switch("text", len(self._buffer))

    def _code(self, out: list, final: bool) -> bool:
        end = self._buffer.find(FENCE)
        marked = [self._buffer.find(m) for m in self._explicit if m in self._buffer]
        if marked and (end < 0 or min(marked) < end):
            return self._marker_inside(out)
        if end >= 0:
            self._say(out, self._buffer[:end + len(FENCE)])
            return self._switch("text", end + len(FENCE))
        keep = 0 if final else _partial_marker_length(self._buffer, self._markers)
        self._say(out, self._buffer[:len(self._buffer) - keep])
        self._buffer = self._buffer[len(self._buffer) - keep:]
        return False


def _partial_marker_length(text: str, markers: Sequence[str]) -> int:
    """The longest end of `text` that could be the start of one of `markers`."""
    longest = max((len(m) for m in markers), default=1)
    for size in range(min(longest - 1, len(text)), 0, -1):
        if any(m.startswith(text[-size:]) for m in markers):
            return size
    return 0
