"""`parley serve`: Parley's speech-to-text, voice and conversation for Home Assistant, over
the Wyoming protocol."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import sys
from pathlib import Path

from rich.console import Console

from assistant.cli.engines import (
    VOICE_HISTORY_MESSAGES,
    load_model,
    load_stt,
    load_tts,
    reply_settings,
)
from assistant.cli.tools import running_mcp
from assistant.confirmation import no_one_to_ask
from assistant.conversation import Conversation
from assistant.errors import ConfigError
from assistant.timer_tool import timers_unavailable
from assistant.tools import builtin_tools

NO_TIMERS = ("Parley cannot set timers through Home Assistant: it could not ring one when "
             "it ends. Ask Home Assistant's own assistant for a timer.")


SERVE_CANNOT_ASK = ("`parley serve` has no one to ask: list the tool in trusted-tools "
                    "in its MCP server's settings to let it run there")


def conversation_factory(args: argparse.Namespace, model, tools=None):
    """How the server makes a conversation: the shared model, tools and intent templates,
    its own history, summary, search and local-intent state (a question it asked)."""
    # Summaries are written after a reply, while the model is free: no reply waits for one.
    settings = reply_settings(args, VOICE_HISTORY_MESSAGES, model, idle_summaries=True)
    matcher = None
    if not args.no_local_intents:
        from assistant.local.matcher import IntentMatcher

        matcher = IntentMatcher()
    tools = tools if tools is not None else serve_tools()

    def create() -> Conversation:
        from assistant.local.answers import LocalIntents

        local = LocalIntents(matcher) if matcher is not None else None
        return Conversation(model, tools, settings, local=local)

    return create


def serve_tools():
    """Parley's own tools, with a timer tool that explains it cannot ring here; MCP
    servers' tools join them (`running_mcp`)."""
    tools = builtin_tools()
    tools.register(timers_unavailable(NO_TIMERS))
    return tools


def stt_label(args: argparse.Namespace) -> str:
    return "whisper-tiny.en" if args.stt_model is None else Path(args.stt_model).name


def run_serve(args: argparse.Namespace) -> int:
    from assistant.serve.server import parse_uri

    console = Console(highlight=False, markup=False)
    address = parse_uri(args.uri)
    if args.max_conversations < 1:
        raise ConfigError("--max-conversations must be at least 1")
    if not args.conversation_minutes > 0:
        raise ConfigError("--conversation-minutes must be more than 0")
    if not address.loopback:
        print(f"parley: warning: serving on {address.uri()}, which other machines can reach. "
              "Wyoming has no authentication: anyone who reaches this port can use Parley's "
              "speech and conversation. Use 127.0.0.1 unless you need it.", file=sys.stderr)
    # MCP servers start while the models load. No one can be asked to confirm a change
    # here: only the tools their config trusts run.
    tools = serve_tools()
    with running_mcp(args, tools, lambda line: print(f"parley: {line}", file=sys.stderr,
                                                     flush=True),
                     confirm=no_one_to_ask(SERVE_CANNOT_ASK)):
        console.print("· Loading the language and speech models…", style="dim")
        model = load_model(args)
        create = conversation_factory(args, model, tools)
        return _serve(args, console, address, model, create)


def _serve(args: argparse.Namespace, console: Console, address, model, create) -> int:
    from assistant.serve.conversations import Conversations
    from assistant.serve.engines import Engines
    from assistant.serve.server import WyomingServer
    from assistant.serve.service import Service, describe

    stt, tts = load_stt(args), load_tts(args)
    voice_name = Path(tts.path).name.removesuffix(".onnx")
    engines = Engines(stt, tts)
    info = describe(stt_label(args), voice_name, tts.language, model.name,
                    importlib.metadata.version("parley"), args.live_transcript_s > 0)
    conversations = Conversations(create, args.max_conversations,
                                  args.conversation_minutes * 60)
    server = WyomingServer(Service(engines, conversations, voice_name, info,
                                   args.live_transcript_s), address)

    def ready(uri: str) -> None:
        print(f"Parley is serving Wyoming at {uri}: speech-to-text, text-to-speech and "
              "conversation. Ctrl-C stops it.", flush=True)

    try:
        asyncio.run(server.run(ready))
    except OSError as exc:  # the port is taken, or the address is not this machine's
        raise ConfigError(f"cannot listen on {address.uri()}: {exc.strerror or exc}. "
                          "Pick another --uri.") from exc
    finally:
        engines.close()
    console.print("· Stopped.", style="dim")
    return 0
