"""`python -m benchmarks.mcp_tools`: a small real tool-calling model with the MCP time
server, Qwen2.5-Coder-0.5B and `mcp-server-time`.

    python -m benchmarks.mcp_tools [--via local|server|both] [--port 8932]

Assembles the model first (`benchmarks.qwen_model`, about 490 MB, outside the project).
Each request is asked in a conversation of its own, without the local intents, with
Parley's own tools and the time server's (started over stdio as a user configures it),
and, as the baseline in the same run, with Parley's own tools alone (a clock that reads
this machine's time only). Run in-process (`--llm-model`) and through a real llama.cpp
server (`python -m llama_cpp.server`). Prints, per request: the calls made, seconds, and
whether the reply says the right hour for the place asked about in words (read from the
real time now, 12- or 24-hour; a reply in JSON does not count); then the totals: the right
tool with the right time zone, right hours, replies written as JSON, needless calls for
requests needing no tool, seconds per answer.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from benchmarks.qwen_model import qwen_model_path
from tests.support.llama_server import run_llama_server

ANSWER_TOKENS = 160
JSON_ANSWER = re.compile(r'^\s*[{\[]|"\w+"\s*:\s*["{\[\d]')
"""A reply written as JSON (a result or a call copied out), not in words."""
CONTEXT = 4096

# (request, the time server's tool and time zone it needs, or None; the place's zone)
REQUESTS: list[tuple[str, tuple[str, str] | None, str | None]] = [
    ("What time is it in Tokyo?", ("get_current_time", "Asia/Tokyo"), "Asia/Tokyo"),
    ("what time is it in tokyo right now", ("get_current_time", "Asia/Tokyo"), "Asia/Tokyo"),
    ("Tell me the current time in Tokyo, Japan.", ("get_current_time", "Asia/Tokyo"),
     "Asia/Tokyo"),
    ("What's the time in New York?", ("get_current_time", "America/New_York"),
     "America/New_York"),
    ("What time is it in London at the moment?", ("get_current_time", "Europe/London"),
     "Europe/London"),
    ("What time is it in Sydney?", ("get_current_time", "Australia/Sydney"),
     "Australia/Sydney"),
    ("When it is 09:00 in Paris, what time is it in Tokyo?", ("convert_time", "Asia/Tokyo"),
     None),
    ("Tell me a joke.", None, None),
    ("How do I list files in a directory on Linux?", None, None),
]


@dataclass
class Tally:
    label: str
    needed: int = 0
    right_tool: int = 0
    """Time requests whose first call was the time server's right tool, right zone."""
    hours_asked: int = 0
    right_hour: int = 0
    """Replies that say, in words (not JSON), the hour it is now at the place asked about."""
    json_answers: int = 0
    """Replies that are (or begin with) JSON: the result copied, or a call written out."""
    not_needed: int = 0
    needless: int = 0
    seconds: list[float] = field(default_factory=list)


def says_hour(reply: str, zone: str) -> bool:
    """Whether `reply` says the hour it is in `zone` now (or a minute ago), 24- or 12-hour."""
    hours = set()
    for ago in (0, 90):
        now = datetime.fromtimestamp(time.time() - ago, ZoneInfo(zone))
        hours |= {f"{now:%H}:{now:%M}", f"{now.hour}:{now:%M}",
                  f"{now.hour % 12 or 12}:{now:%M}"}
    return any(re.search(rf"(?<!\d){re.escape(h)}(?!\d)", reply) for h in hours)


def registry(with_time_server: bool):
    """Parley's own tools, and the time server's when asked (started, and ready)."""
    from assistant.mcp_client.config import ServerConfig
    from assistant.mcp_client.tools import McpTools
    from assistant.session.engines import conversation_tools
    from assistant.timers import Timers

    tools = conversation_tools(Timers())
    if not with_time_server:
        return tools, None
    mcp = McpTools([ServerConfig("time", sys.executable, ("-m", "mcp_server_time"))], tools,
                   lambda line: print(f"  ! {line}"))
    mcp.start()
    mcp.wait_started()
    return tools, mcp


def ask_all(model, with_time_server: bool, label: str) -> Tally:
    from assistant.conversation import Conversation, ReplySettings
    from assistant.events import ToolCall

    tally = Tally(label)
    tools, mcp = registry(with_time_server)
    try:
        for request, needs, zone in REQUESTS:
            conversation = Conversation(model, tools, ReplySettings(answer_tokens=ANSWER_TOKENS))
            events: list = []
            started = time.monotonic()
            done = conversation.reply(request, events.append)
            tally.seconds.append(time.monotonic() - started)
            said = done.text if done else ""
            calls = [e for e in events if isinstance(e, ToolCall)]
            if needs is None:
                tally.not_needed += 1
                tally.needless += bool(calls)
            else:
                tally.needed += 1
                first = calls[0] if calls else None
                tool, wanted = needs
                tally.right_tool += bool(
                    first and first.name == f"time__{tool}"
                    and wanted in {str(v) for v in first.arguments.values()})
            as_json = bool(JSON_ANSWER.search(said))
            tally.json_answers += as_json
            if zone is not None:
                tally.hours_asked += 1
                tally.right_hour += says_hour(said, zone) and not as_json
            shown = [f"{c.name}({', '.join(map(str, c.arguments.values()))})" for c in calls]
            print(f"    {request[:48]!r:52s} {tally.seconds[-1]:5.1f} s  "
                  f"calls {shown or '-'}  said {said[:80]!r}", flush=True)
    finally:
        if mcp is not None:
            mcp.close()
    return tally


def show(tallies: list[Tally]) -> None:
    print("\n| run | right tool and zone | right hour said in words | answers in JSON | "
          "needless calls | s/answer mean (median) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for t in tallies:
        print(f"| {t.label} | {t.right_tool}/{t.needed} | {t.right_hour}/{t.hours_asked} | "
              f"{t.json_answers}/{len(REQUESTS)} | {t.needless}/{t.not_needed} | "
              f"{statistics.mean(t.seconds):.1f} ({statistics.median(t.seconds):.1f}) |")


def bench(path: str, via: str, port: int) -> list[Tally]:
    tallies: list[Tally] = []
    runs = [(True, "time server"), (False, "Parley's tools only")]
    if via in ("local", "both"):
        from models.llama import LlamaChatModel

        model = LlamaChatModel(path, context_size=CONTEXT)
        for with_server, name in runs:
            print(f"  in-process (--llm-model), {name}:", flush=True)
            tallies.append(ask_all(model, with_server, f"`--llm-model`, {name}"))
        del model
        gc.collect()  # one model in memory at a time: the server loads its own
    if via in ("server", "both"):
        from models.openai_compat import OpenAIChatModel

        with run_llama_server(model=Path(path), context=CONTEXT, port=port,
                              start_s=180) as url:
            model = OpenAIChatModel(url, context_size=CONTEXT)
            for with_server, name in runs:
                print(f"  llama_cpp.server (--llm-url {url}), {name}:", flush=True)
                tallies.append(ask_all(model, with_server, f"`--llm-url`, {name}"))
    return tallies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--via", choices=["local", "server", "both"], default="both")
    parser.add_argument("--port", type=int, default=8932)
    args = parser.parse_args(argv)
    path = str(qwen_model_path())
    started = time.monotonic()
    print(f"{len(REQUESTS)} requests, {sum(1 for _, n, _ in REQUESTS if n)} needing the time "
          f"server; context {CONTEXT:,}, answers up to {ANSWER_TOKENS} tokens, no local "
          "intents")
    show(bench(path, args.via, args.port))
    print(f"\nTotal {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
