"""`parley serve`: Parley's speech-to-text, voice and conversation for Home Assistant, over
the Wyoming protocol."""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from pathlib import Path

from rich.console import Console

from assistant.errors import ConfigError
from assistant.session.served import ServedSession, served_session
from assistant.session.settings import Settings


def stt_label(settings: Settings) -> str:
    chosen = settings.speech.stt_model
    return "whisper-tiny.en" if chosen is None else Path(chosen).name


def run_serve(settings: Settings) -> int:
    from assistant.serve.server import parse_uri

    console = Console(highlight=False, markup=False)
    serve = settings.serve
    address = parse_uri(serve.uri)
    if serve.max_conversations < 1:
        raise ConfigError("--max-conversations must be at least 1")
    if not serve.conversation_minutes > 0:
        raise ConfigError("--conversation-minutes must be more than 0")
    if not address.loopback:
        print(f"parley: warning: serving on {address.uri()}, which other machines can reach. "
              "Wyoming has no authentication: anyone who reaches this port can use Parley's "
              "speech and conversation. Use 127.0.0.1 unless you need it.", file=sys.stderr)
    with served_session(settings, lambda line: print(f"parley: {line}", file=sys.stderr,
                                                     flush=True),
                        lambda: console.print("· Loading the language and speech models…",
                                              style="dim")) as served:
        return _serve(settings, console, address, served)


def _serve(settings: Settings, console: Console, address, served: ServedSession) -> int:
    from assistant.serve.conversations import Conversations
    from assistant.serve.engines import Engines
    from assistant.serve.server import WyomingServer
    from assistant.serve.service import Service, describe

    stt, tts, serve = served.stt, served.tts, settings.serve
    live_transcript_s = settings.listening.live_transcript_s
    voice_name = Path(tts.path).name.removesuffix(".onnx")
    engines = Engines(stt, tts, served.approve)
    info = describe(stt_label(settings), voice_name, tts.language, served.model.name,
                    importlib.metadata.version("parley"), live_transcript_s > 0)
    conversations = Conversations(served.create, serve.max_conversations,
                                  serve.conversation_minutes * 60)
    server = WyomingServer(Service(engines, conversations, voice_name, info,
                                   live_transcript_s), address)
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
