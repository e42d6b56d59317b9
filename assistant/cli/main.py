"""`parley`: the command line (chat, voice, replay, devices); flags also read PARLEY_<FLAG>."""

from __future__ import annotations

import argparse
import io
import os
import sys
import threading
from pathlib import Path

from assistant.errors import ConfigError, ModelError

HELP_TEXT = """Commands:
  /help      this help
  /history   the numbered messages of this conversation
  /summary   the summary of earlier messages that no longer fit, and what it covers
  /clear     forget the conversation and start again
  /quit      end (or Ctrl-D); Ctrl-C stops a reply but keeps the conversation"""


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"PARLEY_{name.upper()}", default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parley",
        description="Parley, a local assistant. Runs on the embedded models unless told otherwise; "
                    "nothing of a conversation is written to disk.")
    parser.add_argument("--config", type=Path, default=None,
                        help="a TOML file of settings named like the flags "
                             "(default ~/.config/parley/config.toml, or PARLEY_CONFIG)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = commands.add_parser(
        "chat", help="typed chat",
        description="Typed chat. Piped stdin is read one message a line, each reply printed.")
    voice = commands.add_parser(
        "voice", help="spoken conversation, hands-free or push-to-talk (the default when a "
                      "microphone works)",
        description="Spoken conversation: Parley listens, answers out loud and shows what it "
                    "heard and said. A typed line is a message in the same conversation.")
    replay = commands.add_parser(
        "replay", help="replay a recorded session headless and print a JSON report",
        description="Feed a session file's typed and spoken turns through the same path as "
                    "the microphone and print one JSON document (turns with what was heard, "
                    "replied, events and timings; the numbered messages; the summary).")
    replay.add_argument("session", type=Path, help="the session JSON file")
    replay.add_argument("--fast", action="store_true",
                        help="feed audio as fast as possible instead of at real-time pace")
    replay.add_argument("--out", type=Path, default=None,
                        help="write the JSON report to this file instead of printing it")
    replay.add_argument("--audio-out", type=Path, default=None,
                        help="write each turn's spoken reply as a WAV file into this folder")
    commands.add_parser("devices", help="list audio input and output devices",
                        description="List the audio devices PortAudio sees, for "
                                    "--input-device and --output-device.")
    from assistant.cli.voice import add_voice_flags

    add_model_flags(parser)
    add_voice_flags(parser)
    # The same flags after the subcommand; unset ones leave the top-level values alone.
    for sub in (chat, voice, replay):
        add_model_flags(sub, suppress=True)
    add_voice_flags(voice, suppress=True)
    add_voice_flags(replay, suppress=True, devices=False)  # replay has no devices
    return parser


def add_model_flags(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    group = _Group(parser.add_argument_group("language model"), suppress)
    group.add_argument("--llm-model", type=Path, default=_env("llm_model", None),
                       help="a GGUF chat model (default: the embedded SmolLM2-135M)")
    group.add_argument("--llm-url", default=_env("llm_url", None),
                       help="an OpenAI-compatible server instead, e.g. http://host:8080/v1 "
                            "(key from PARLEY_LLM_API_KEY)")
    group.add_argument("--llm-name", default=_env("llm_name", "default"),
                       help="the model name to ask the server for (default: 'default')")
    group.add_argument("--llm-timeout", type=float, default=float(_env("llm_timeout", "120")),
                       help="seconds to wait for the server (default 120)")
    group.add_argument("--ctx", type=int, default=int(_env("ctx", "8192")),
                       help="context size in tokens (default 8192)")
    group.add_argument("--threads", type=int, default=_env("threads", None),
                       help="llama.cpp threads generating the answer (default: half the "
                            "cores, at most 4; more than the idle cores stalls it)")
    group.add_argument("--batch-threads", type=int, default=_env("batch_threads", None),
                       help="llama.cpp threads reading the prompt (default: the cores, "
                            "at most 4)")
    group.add_argument("--answer-tokens", type=int, default=int(_env("answer_tokens", "1024")),
                       help="tokens kept free for the answer (default 1024)")
    group.add_argument("--max-tool-calls", type=int,
                       default=int(_env("max_tool_calls", "4")),
                       help="research budget: tool calls per reply (default 4)")


class _Group:
    """An argument group whose defaults can be suppressed (for subcommand copies)."""

    def __init__(self, group, suppress: bool) -> None:
        self._group, self._suppress = group, suppress

    def add_argument(self, *names, **options) -> None:
        if self._suppress:
            options["default"] = argparse.SUPPRESS
        self._group.add_argument(*names, **options)


def load_model(args: argparse.Namespace):
    """The chat model the flags ask for: a remote server, a GGUF, or the embedded one."""
    if args.llm_url:
        from models.openai_compat import OpenAIChatModel

        return OpenAIChatModel(args.llm_url, args.llm_name, os.environ.get("PARLEY_LLM_API_KEY"),
                               context_size=args.ctx, timeout=args.llm_timeout)
    from models.embedded import EmbeddedModelMissing, default_llm
    from models.llama import LlamaChatModel, ModelLoadError

    def count(value) -> int | None:  # from the environment it is a string; unset: the default
        return int(value) if value else None

    try:
        return LlamaChatModel(args.llm_model or default_llm(), context_size=args.ctx,
                              threads=count(args.threads),
                              batch_threads=count(args.batch_threads))
    except (ModelLoadError, EmbeddedModelMissing) as exc:
        raise ModelError(f"Cannot load the language model: {exc}. "
                         "Pass --llm-model PATH.gguf with a valid GGUF file.") from exc


def load_conversation(args: argparse.Namespace):
    from assistant.conversation import Conversation, ReplySettings
    from assistant.tools import builtin_tools

    if args.ctx < 512:
        raise ConfigError(f"--ctx {args.ctx} is too small; use at least 512")
    if not 16 <= args.answer_tokens <= args.ctx // 2:
        raise ConfigError(f"--answer-tokens must be between 16 and half of --ctx ({args.ctx // 2})")
    settings = ReplySettings(answer_tokens=args.answer_tokens,
                             max_tool_calls=args.max_tool_calls)
    return Conversation(load_model(args), builtin_tools(), settings)


def config_defaults(argv: list[str]) -> dict:
    """Defaults from a TOML file: `--config FILE`, PARLEY_CONFIG, or ~/.config/parley/config.toml.

    Keys are flag names (`ctx = 4096`, `llm-model = "..."`); flags and env still win.
    """
    import tomllib

    explicit = None
    if "--config" in argv[:-1]:
        explicit = argv[argv.index("--config") + 1]
    path = Path(explicit or os.environ.get("PARLEY_CONFIG")
                or Path.home() / ".config" / "parley" / "config.toml")
    if not path.is_file():
        if explicit or os.environ.get("PARLEY_CONFIG"):
            raise ConfigError(f"no config file at {path}")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc})") from exc
    known = {a.dest for a in build_parser()._actions}
    values = {key.replace("-", "_"): value for key, value in data.items()}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    return values


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        defaults = config_defaults(argv)
    except ConfigError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    # Environment variables were read into the flag defaults; a config file only fills
    # settings neither the environment nor the command line gave.
    parser.set_defaults(**{k: v for k, v in defaults.items()
                           if f"PARLEY_{k.upper()}" not in os.environ})
    args = parser.parse_args(argv)
    from assistant.cli import voice as voice_cli

    command = args.command
    if command == "devices":
        return voice_cli.run_devices()
    if command is None and sys.stdin.isatty():
        command = "voice"  # at a terminal: voice when a microphone works
    if command == "voice":
        # No PortAudio or no microphone: say why in one line, then text chat.
        problem = voice_cli.input_device_problem(args)
        if problem is None:
            return voice_cli.run_voice(args, args.push_to_talk)
        print(f"parley: starting text chat, because voice cannot start: {problem}",
              file=sys.stderr)
    if command == "replay":
        return voice_cli.run_replay(args)
    try:
        conversation = load_conversation(args)
    except (ConfigError, ModelError) as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    from assistant.cli.chat import ChatSession

    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    session = ChatSession(conversation, interactive=sys.stdin.isatty())
    return session.run(stdin)


def run_in_worker(target, cancel) -> None:
    """Run a reply on a worker so Ctrl-C in the main thread only cancels it.

    It waits on an Event, not `Thread.join`: in CPython 3.11 a join interrupted by Ctrl-C
    can mark a still-running thread as finished (bpo-45274), and the prompt would come
    back while the reply is still printing.
    """
    finished = threading.Event()

    def run() -> None:
        try:
            target()
        finally:
            finished.set()

    worker = threading.Thread(target=run, daemon=True)
    try:
        worker.start()
    except KeyboardInterrupt:  # Ctrl-C as the reply starts: it starts cancelled
        cancel.cancel()
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            cancel.cancel()
