"""`python -m benchmarks.tool_model`: a small real tool-calling model, Qwen2.5-Coder-0.5B.

    python -m benchmarks.tool_model [--only requests|recall] [--via local|server|both]
                                    [--modes before,after] [--port 8931]

Assembles the model first (`benchmarks.qwen_model`, about 490 MB, outside the project).

`requests`: 22 requests, 7 needing a tool (a reminder, a percentage, days until a date)
and 15 needing none (docker logs, a cat's name, a JSON example the user asks for), asked
in sessions of five or six (so a reply sees the ones before it, as in a real chat), without
the local intents (they would answer the tool requests before the model). Run in-process
(`--llm-model`) and through a real llama.cpp server (`python -m llama_cpp.server`, which
returns this model's calls as text: Parley reads them from the content). Each runs as
Parley was before (`<tool_call>` blocks only, every tool offered, the earlier tool line and
timer description) and as it is now, in the same run. Prints: calls that ran without an
error, replies calling a tool when none was needed, replies with a call written out as
text, tool requests that got their tool, empty replies, seconds per answer.

`recall`: the decision record's evaluation. A long paste comes early (a compose file, an
env file, a release checklist), then twelve filler exchanges (put in the history as said,
so the run stays short), in a 2,048-token context: the first question's reply has the model
summarize the paste out of the prompt; then two questions about its details: does the model
call conversation_history and answer right? Recall hints are off, so only the tool can
find it. In-process only.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.qwen_model import qwen_model_path
from benchmarks.tool_recall import bench_recall
from tests.support.llama_server import run_llama_server
from tests.support.planted_facts import FILLERS

ANSWER_TOKENS = 200
CONTEXT = 4096

# (request, the tool it needs or None)
SESSIONS: list[list[tuple[str, str | None]]] = [
    [("remind me in 10 minutes to take the pizza out", "timer"),
     ("How do I check the logs of a docker container?", None),
     ("What is a good name for a cat?", None),
     ("How do I list files in a directory on Linux?", None),
     ("Tell me a joke.", None),
     ("what is 3.5% of 1,240 plus 17", "calculator")],
    [("how many days are left until new year's eve?", "clock"),
     ("What's the difference between a list and a tuple in Python?", None),
     ("Write a JSON example of a user with a name and an email.", None),
     ("Why is the sky blue?", None),
     ("what is an 18% tip on a 64.50 bill?", "calculator")],
    [("set a reminder in half an hour to call mum", "timer"),
     ("What does HTTP status 404 mean?", None),
     ("How do I undo the last git commit?", None),
     ("Suggest a name for a bakery.", None),
     ("Explain recursion in one sentence.", None),
     ("is it morning or evening where I am right now?", "clock")],
    [("How do I make a Python virtual environment?", None),
     ("What rhymes with orange?", None),
     ("Give me a tip for sleeping better.", None),
     ("how much is 1,299 divided by 12?", "calculator"),
     ("What is the capital of Australia?", None)],
]

SPOKEN_CALL = re.compile(r'<tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>|\{\s*"name"\s*:')
"""A call written out in what was said, in any form (also the flat {"name": "timer",
"action": …}); not counted for the request that asks for JSON with a name."""
ASKS_FOR_JSON = "Write a JSON example of a user with a name and an email."


OLD_STRATEGY = ("Use a tool only when it helps: clock for the date or time, calculator for "
                "arithmetic, timer to set, check or cancel timers.")
OLD_TIMER = ("Set, check, pause, resume, change or cancel timers. Examples: "
             '{"action": "start", "seconds": 600, "name": "pizza"}; {"action": "status"}; '
             '{"action": "cancel", "name": "pizza"}; {"action": "add", "seconds": 60}.')


@contextlib.contextmanager
def parley(mode: str) -> Iterator[None]:
    """Parley as it is ("after"), or as it was ("before"): `<tool_call>` blocks only, every
    tool offered to every request, the earlier tool line and timer description."""
    if mode == "after":
        yield
        return
    from unittest import mock

    import assistant.timer_tool as timer_tool

    with mock.patch("models.toolcalls.DEFAULT_FORMS", frozenset({"tags"})), \
            mock.patch("assistant.prompt.TOOL_STRATEGY", OLD_STRATEGY), \
            mock.patch("assistant.conversation.offered_for", lambda request, tools: tools), \
            mock.patch.object(timer_tool, "SPEC", replace(timer_tool.SPEC,
                                                          description=OLD_TIMER)):
        yield


def tools():
    from assistant.timer_tool import timer_tool
    from assistant.timers import Timers
    from assistant.tools import builtin_tools

    registry = builtin_tools()
    registry.register(timer_tool(Timers()))
    return registry


@dataclass
class Tally:
    label: str
    results: int = 0
    """Tool results (calls Parley read)."""
    clean: int = 0
    """…that ran without an error."""
    spoken_calls: int = 0
    """Replies with a call written out as text."""
    needless: int = 0
    """Replies to a request needing no tool that called one (or wrote a call out)."""
    needed: int = 0
    got_tool: int = 0
    """Tool requests whose tool was called."""
    not_needed: int = 0
    empty: int = 0
    seconds: list[float] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)


def ask_all(model, mode: str, label: str) -> Tally:
    from assistant.conversation import Conversation, ReplySettings
    from assistant.events import ToolCall, ToolResult

    tally = Tally(label)
    with parley(mode):
        for session in SESSIONS:
            conversation = Conversation(model, tools(), ReplySettings(answer_tokens=ANSWER_TOKENS))
            for request, needs in session:
                events: list = []
                started = time.monotonic()
                done = conversation.reply(request, events.append)
                tally.seconds.append(time.monotonic() - started)
                said = done.text if done else ""
                called = [e.name for e in events if isinstance(e, ToolCall)]
                results = [e for e in events if isinstance(e, ToolResult)]
                tally.results += len(results)
                tally.clean += sum(not r.is_error for r in results)
                spoken = request != ASKS_FOR_JSON and bool(SPOKEN_CALL.search(said))
                tally.spoken_calls += spoken
                tally.empty += not said.strip()
                if needs is None:
                    tally.not_needed += 1
                    tally.needless += bool(results) or spoken
                else:
                    tally.needed += 1
                    tally.got_tool += needs in called
                errors = [r.content[7:60] for r in results if r.is_error]
                tally.shown.append(
                    f"    {request[:44]!r:48s} {tally.seconds[-1]:5.1f} s  calls {called or '-'}"
                    f"{f' errors {errors}' if errors else ''}  said {said[:70]!r}")
                print(tally.shown[-1], flush=True)
    return tally


def show(tallies: list[Tally]) -> None:
    print(f"\n  {'run':28s} {'calls ran clean':>16s} {'needless calls':>15s} "
          f"{'calls said as text':>19s} {'tool requests served':>21s} {'empty':>6s} "
          f"{'s/answer (median)':>18s}")
    for t in tallies:
        attempts = t.results + t.spoken_calls
        share = f" ({100 * t.clean / attempts:.0f}%)" if attempts else ""
        clean = f"{t.clean}/{attempts}{share}"
        print(f"  {t.label:28s} {clean:>16s} {f'{t.needless}/{t.not_needed}':>15s} "
              f"{f'{t.spoken_calls}/{t.needed + t.not_needed}':>19s} "
              f"{f'{t.got_tool}/{t.needed}':>21s} {t.empty:6d} "
              f"{statistics.mean(t.seconds):7.1f} ({statistics.median(t.seconds):.1f})")


def bench_requests(path: str, via: str, modes: list[str], port: int) -> None:
    count = sum(len(s) for s in SESSIONS)
    needing = sum(1 for s in SESSIONS for _, needs in s if needs)
    print(f"\nRequests: {count} in {len(SESSIONS)} sessions, {needing} needing a tool; "
          f"context {CONTEXT:,}, answers up to {ANSWER_TOKENS} tokens, no local intents")
    tallies: list[Tally] = []
    if via in ("local", "both"):
        from models.llama import LlamaChatModel

        model = LlamaChatModel(path, context_size=CONTEXT)
        for mode in modes:
            print(f"  in-process (--llm-model), {mode}:", flush=True)
            tallies.append(ask_all(model, mode, f"--llm-model, {mode}"))
        del model
        gc.collect()  # one model in memory at a time: the server loads its own
    if via in ("server", "both"):
        from models.openai_compat import OpenAIChatModel

        with run_llama_server(model=Path(path), context=CONTEXT, port=port,
                              start_s=180) as url:
            model = OpenAIChatModel(url, context_size=CONTEXT)
            for mode in modes:
                print(f"  llama_cpp.server (--llm-url {url}), {mode}:", flush=True)
                tallies.append(ask_all(model, mode, f"--llm-url, {mode}"))
    show(tallies)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["requests", "recall"])
    parser.add_argument("--via", choices=["local", "server", "both"], default="both")
    parser.add_argument("--modes", default="before,after",
                        help="before (Parley's earlier tool handling), after, or both")
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--recall-ctx", type=int, default=2048)
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(modes) <= {"before", "after"}:
        parser.error("--modes takes before, after or both")
    path = str(qwen_model_path())
    started = time.monotonic()
    if args.only in (None, "requests"):
        bench_requests(path, args.via, modes, args.port)
    if args.only in (None, "recall"):
        bench_recall(path, args.recall_ctx, modes, parley, FILLERS * 2, tools)
    print(f"\nTotal {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
