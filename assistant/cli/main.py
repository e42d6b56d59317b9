"""`parley`: the command line (chat, voice, replay, serve, web, tools, devices)."""

from __future__ import annotations

import argparse
import io
import logging
import sys
from pathlib import Path
from typing import NoReturn

from assistant.cli.logs import configure_logging
from assistant.cli.settings import add_settings, resolve, typed
from assistant.cli.web import add_web_arguments
from assistant.errors import USER_ERRORS, ConfigError

log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """A mistake on the command line is one line, as a bad variable or config key is (its
    subcommands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations: replay's --echo would be an ambiguous abbreviation of --echo-cancel.
    parser = _Parser(
        prog="parley", allow_abbrev=False,
        description="Parley, a local assistant. Runs on the embedded models unless told otherwise; "
                    "nothing of a conversation is written to disk unless --save or --resume "
                    "asks for it. Every other setting also reads PARLEY_<SETTING> (e.g. "
                    "PARLEY_CTX=4096) and the config file.")
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
    replay.add_argument("--echo", type=echo_gain, default=None, metavar="GAIN_DB",
                        help="simulate speakers: each reply comes back into the input 60 ms "
                             "later at GAIN_DB (0: as loud as played, -10: quieter); audio "
                             "then runs in real time. Add --echo-cancel to cancel it")
    serve = commands.add_parser(
        "serve", help="serve speech-to-text, the voice and conversation to Home Assistant "
                      "(Wyoming protocol)",
        description="Serve Parley to Home Assistant over the Wyoming protocol: speech-to-text "
                    "(Whisper), text-to-speech (Piper) and a conversation agent that "
                    "remembers each conversation. Listens on 127.0.0.1:10700 unless --uri "
                    "says otherwise. Add it in Home Assistant under Settings > Devices & "
                    "services > Add integration > Wyoming Protocol, with this machine's host "
                    "and the port. Nothing of a conversation is written to disk.")
    web = commands.add_parser(
        "web", help="the conversation in the browser, on a local web server",
        description="Start a local web server and print one line with the address to open "
                    "(it carries a random token, which every request needs). The page shows "
                    "the numbered conversation, the reply as it is written, tool steps, "
                    "summaries, timers and questions; every tab shares one conversation. "
                    "It talks too: switch Hands-free on or hold Push to talk, and Parley "
                    "answers aloud in the page (the speech and listening flags of voice "
                    "apply; without the speech engines it is typed chat). "
                    "GET /api/conversation and the WebSocket /ws are for scripts (see "
                    "docs/web.md). Ctrl-C stops it.")
    add_web_arguments(web)
    tools = commands.add_parser(
        "tools", help="list every tool the model can use, or call one: tools call NAME JSON",
        description="List every tool the model can use: Parley's own and those of the MCP "
                    "servers configured (--mcp FILE or [mcp-servers.NAME] in the config file), "
                    "with the server each comes from and whether it asks you first. "
                    "`parley tools call NAME '{\"argument\": \"value\"}'` runs one "
                    "directly and prints what the model would read, to check a configuration.")
    tools.add_argument("tool_command", nargs="*", metavar="call NAME JSON",
                       help="call the tool NAME with these arguments (a JSON object)")
    commands.add_parser("wake-words", help="list the wake words for --wake-word",
                        description="List the wake words (microWakeWord models shipped in "
                                    "pymicro-wakeword) that --wake-word takes.")
    commands.add_parser("devices", help="list audio input and output devices",
                        description="List the audio devices PortAudio sees, for "
                                    "--input-device and --output-device.")
    # The settings go before the subcommand or after it; only typed ones count there.
    add_settings(parser, None)
    for name, sub in (("chat", chat), ("voice", voice), ("replay", replay), ("serve", serve),
                      ("web", web), ("tools", tools)):
        add_settings(sub, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = resolve(build_parser().parse_args(argv))
    except ConfigError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.debug)
    log.debug("settings: %s", {k: v for k, v in vars(args).items() if v is not None})
    try:
        return run(args)
    except USER_ERRORS as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    except BaseException as exc:
        # Ctrl-C while the models load (as itself, or turned into an error of a library's
        # own, as onnxruntime's import does): stop quietly, with the shell's code for it.
        if not caused_by_ctrl_c(exc):
            raise
        print(file=sys.stderr)
        return 130


def caused_by_ctrl_c(exc: BaseException) -> bool:
    """Whether `exc` is a Ctrl-C, or an error a library raised because of one."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def echo_gain(text: str) -> float:
    """Replay's --echo: a gain in dB from -60 to +12."""
    value = float(text)
    if not -60 <= value <= 12:
        raise argparse.ArgumentTypeError(f"{text} dB is outside -60 to 12")
    return value


def run(args: argparse.Namespace) -> int:
    command = args.command
    settings = typed(args)
    if command == "wake-words":
        from audio.wakeword import describe_wake_words

        print(describe_wake_words())
        return 0
    if command == "serve":
        from assistant.cli.serve import run_serve

        return run_serve(settings)
    if command == "tools":
        from assistant.cli.tools import run_tools

        return run_tools(args, settings.tools)
    if command == "devices":
        from assistant.cli.devices import run_devices

        return run_devices()
    if command is None and sys.stdin.isatty():
        command = "voice"  # at a terminal: voice when a microphone works
    if command not in (None, "chat", "voice", "web") and (args.save or args.resume):
        raise ConfigError("--save and --resume are for chat, voice and web")  # never ignored
    if command in ("voice", "replay") and args.wake_word:
        from audio.wakeword import find_wake_word

        find_wake_word(args.wake_word)  # an unknown name: the list, before anything loads
        if command == "voice" and args.push_to_talk:
            raise ConfigError("--wake-word is for hands-free voice; leave out --push-to-talk")
    if command == "voice":
        from assistant.cli.devices import input_device_problem
        from assistant.cli.voice import run_voice

        # No PortAudio or no microphone: say why in one line, then text chat.
        problem = input_device_problem(settings.listening)
        if problem is None:
            return run_voice(settings)
        print(f"parley: starting text chat, because voice cannot start: {problem}",
              file=sys.stderr)
    if command == "web":
        from assistant.cli.web import run_web

        return run_web(args, settings)
    if command == "replay":
        from assistant.cli.replay import run_replay

        return run_replay(args, settings)
    from assistant.cli.chat import ChatSession
    from assistant.cli.saved import announce, close_saved
    from assistant.session.builder import chat_session

    interactive = sys.stdin.isatty()
    # MCP servers start while the model loads; a failure is a line on stderr, whenever it
    # comes (on stdout it would land at a different place in each piped transcript).
    # At a terminal the user types between replies: the summary is written then.
    with chat_session(settings, lambda line: print(f"! {line}", file=sys.stderr, flush=True),
                      idle_summaries=interactive) as built:
        conversation, mcp = built.conversation, built.mcp
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        session = ChatSession(conversation, interactive=interactive, timers=built.timers,
                              mcp=mcp, stdin=stdin)
        built.timers.when_finished(session.timer_finished)  # the session shows it going off
        if mcp is not None and not interactive:  # a script is offered the same tools each run
            mcp.wait_started()
        announce(conversation, session.console)
        try:
            return session.run(stdin)
        finally:
            close_saved(conversation)
