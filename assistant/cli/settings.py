"""Flags, `PARLEY_*` environment variables and the TOML config file, in one table.

A setting's value comes from, in order: its flag, its environment variable, the config
file, its default. Nothing is parsed while the parser is built, so `parley --help`
works whatever the environment holds; a bad value names its variable or key and its
value in one line (exit code 2), never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError
from assistant.mcp_client import config as mcp_config
from assistant.session.settings import PARTS, Settings, default_of

CONFIG_PATH = Path("~/.config/parley/config.toml")
MCP_SERVERS = "mcp_servers"
"""The config file's [mcp-servers.NAME] tables, as `args.mcp_servers` (a list)."""


def _whole(text: str) -> int:
    return int(text.strip())


def _number(text: str) -> float:
    return _finite(float(text.strip()))


def _finite(value: float) -> float:
    # inf and nan parse as floats, but no setting means them: they would overflow later.
    if not math.isfinite(value):
        raise ValueError(value)
    return value


def _exchanges(text: str) -> int | str:
    word = text.strip().lower()
    if word in ("auto", "all"):
        return word
    if int(word) < 0:
        raise ValueError(text)
    return int(word)


END_OF_TURN = ("smart", "silence")


def _end_of_turn(text: str) -> str:
    word = text.strip().lower()
    if word not in END_OF_TURN:
        raise ValueError(text)
    return word


def _score(text: str) -> float:
    value = _number(text)
    if not 0.0 < value <= 1.0:
        raise ValueError(text)
    return value


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _switch(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE | _FALSE:
        return word in _TRUE
    raise ValueError(text)


_WHAT: dict[Callable, str] = {_whole: "a whole number", _number: "a number",
                              _switch: "true or false (1/0, yes/no)",
                              _exchanges: "a whole number, 'all' or 'auto'", str: "text",
                              Path: "a path", _end_of_turn: "smart or silence",
                              _score: "a number above 0 and at most 1"}


@dataclass(frozen=True)
class Setting:
    flag: str
    parse: Callable[[str], Any]
    help: str
    group: str
    commands: frozenset[str]
    """The subcommands that take it after their name (all take it before)."""
    flag_only: bool = False
    """Read from its flag alone, never the environment or the config file: what writes a
    conversation to disk is asked for on the command line, each time."""
    metavar: str | None = None
    """What --help calls its value (default: its name in capitals)."""

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def default(self) -> Any:
        """Its value when nothing sets it: the typed settings' own default."""
        return default_of(self.dest)

    @property
    def env(self) -> str:
        return f"PARLEY_{self.dest.upper()}"

    @property
    def switch(self) -> bool:
        return self.parse is _switch


_ALL = frozenset({"chat", "voice", "replay", "serve", "web"})
_SPEECH = frozenset({"voice", "replay", "web"})
_ROOM_ECHO = frozenset({"voice", "replay"})
"""Settings for Parley's own echo cancelling: the web page has the browser's."""
_LIVE = frozenset({"voice"})
_TALK = frozenset({"chat", "voice", "web"})
_SERVE = frozenset({"serve"})
_SPEECH_ENGINES = _SPEECH | _SERVE
_TOOLS = frozenset({"tools"})

SETTINGS: tuple[Setting, ...] = (
    Setting("--debug", _switch, "show debug lines with the timings of every stage, "
            "and tracebacks, on stderr (never a file)", "output", _ALL | _TOOLS),
    Setting("--llm-model", Path, "a GGUF chat model (default: the embedded SmolLM2-135M)",
            "language model", _ALL),
    Setting("--llm-url", str, "an OpenAI-compatible server instead, e.g. "
            "http://host:8080/v1 (key from PARLEY_LLM_API_KEY)", "language model", _ALL),
    Setting("--llm-name", str, "the model name to ask the server for (default: "
            "'default')", "language model", _ALL),
    Setting("--llm-tool-choice", str, "with --llm-url: the tool_choice sent with the "
            "tools, auto, required, none or a tool's name, which the server must then call "
            "(llama-cpp-python's server calls a tool only when named; pair a name with "
            "--max-tool-calls 1)", "language model", _ALL, metavar="CHOICE"),
    Setting("--llm-timeout", _number, "seconds to wait for the server (default 120)",
            "language model", _ALL),
    Setting("--ctx", _whole, "context size in tokens (default 8192)", "language model",
            _ALL),
    Setting("--threads", _whole, "llama.cpp threads generating the answer (default: "
            "half the cores, at most 4; more than the idle cores stalls it)", "language model",
            _ALL),
    Setting("--batch-threads", _whole, "llama.cpp threads reading the prompt (default: "
            "the cores, at most 4)", "language model", _ALL),
    Setting("--answer-tokens", _whole, "tokens kept free for the answer (default 1024)",
            "language model", _ALL),
    Setting("--max-tool-calls", _whole, "research budget: tool calls per reply (default 4)",
            "language model", _ALL),
    Setting("--model-exchanges", _exchanges, "earlier exchanges the model sees "
            "word for word; the rest stays searchable (default auto: 0 for the embedded "
            "135M model, which repeats what it sees, all that fit for any other)",
            "language model", _ALL),
    Setting("--no-local-intents", _switch, "send every message to the model, even the "
            "time, timers and arithmetic Parley answers itself (for a model that should "
            "decide)", "language model", _ALL),
    Setting("--mcp", Path, "a file of MCP servers whose tools the model may use: "
            "JSON with mcpServers (the file other MCP clients read) or TOML with "
            "[mcp-servers.NAME] tables, which the config file can also hold (see docs/mcp.md)",
            "tools", _ALL | _TOOLS, metavar="FILE"),
    Setting("--save", Path, "keep this conversation in FILE, a new file readable only "
            "by you, each message written as it is said (without it nothing is written)",
            "conversation", _TALK, flag_only=True, metavar="FILE"),
    Setting("--resume", Path, "continue the conversation saved in FILE (its numbered "
            "messages, summary and search), saving into it as it goes", "conversation", _TALK,
            flag_only=True, metavar="FILE"),
    Setting("--uri", str, "where `parley serve` listens, "
            "tcp://HOST:PORT (default tcp://127.0.0.1:10700, this machine only; another "
            "address lets anyone who reaches it use Parley: Wyoming has no authentication)",
            "server", _SERVE),
    Setting("--max-conversations", _whole, "conversations `parley serve` keeps at once; "
            "a new one makes room by forgetting the one unused longest (default 32)",
            "server", _SERVE),
    Setting("--conversation-minutes", _number, "`parley serve` forgets a conversation "
            "after this many minutes without a message (default 30)", "server", _SERVE),
    Setting("--stt-model", Path, "a CTranslate2 Whisper model folder (default: the "
            "embedded tiny.en)", "speech", _SPEECH_ENGINES),
    Setting("--voice", Path, "a Piper voice .onnx, with its .onnx.json beside it "
            "(default: the embedded en_US joe)", "speech", _SPEECH_ENGINES),
    Setting("--stt-threads", _whole, "speech-to-text threads (default 2)", "speech",
            _SPEECH_ENGINES),
    Setting("--tts-threads", _whole, "text-to-speech threads (default 2)", "speech",
            _SPEECH_ENGINES),
    Setting("--push-to-talk", _switch, "Enter starts listening; the utterance ends at "
            "the end-of-speech silence or at the next Enter", "listening", _LIVE),
    Setting("--input-device", str, "microphone: an index or part of a name from "
            "`parley devices` (default: the system's)", "listening", _LIVE),
    Setting("--output-device", str, "speaker: an index or part of a name (default: the "
            "system's)", "listening", _LIVE),
    Setting("--vad-aggressiveness", _whole, "0 (hears most) to 3 (ignores most noise); "
            "default 2", "listening", _SPEECH),
    Setting("--pre-roll-ms", _whole, "audio kept from before speech was detected "
            "(default 300)", "listening", _SPEECH),
    Setting("--end-of-turn", _end_of_turn, "what decides you have finished: smart, "
            "a turn model asked at each pause (it waits when you sound unfinished), or "
            "silence, a fixed --end-silence-ms (default smart)", "listening", _SPEECH,
            metavar="smart|silence"),
    Setting("--turn-threshold", _score, "with --end-of-turn smart: the turn model's "
            "score (0-1) that ends your turn at a pause; higher waits more often (default "
            "0.5)", "listening", _SPEECH),
    Setting("--turn-max-silence-ms", _whole, "with --end-of-turn smart: silence that "
            "ends a turn the model judged unfinished (default 1500)", "listening", _SPEECH),
    Setting("--end-silence-ms", _whole, "with --end-of-turn silence: silence that ends "
            "an utterance (default 700)", "listening", _SPEECH),
    Setting("--min-speech-ms", _whole, "shorter sounds are ignored as noise (default 250)",
            "listening", _SPEECH),
    Setting("--max-utterance-s", _number, "an utterance is cut here and goes on as the "
            "next (default 20)", "listening", _SPEECH),
    Setting("--wake-word", str, "listen only after this wake word, e.g. okay_nabu "
            "(`parley wake-words` lists them); off by default", "listening", _SPEECH),
    Setting("--follow-up-s", _number, "with --wake-word: after a reply, the next request "
            "needs no wake word this long (default 6; 0: always say it)", "listening", _SPEECH),
    Setting("--echo-cancel", _switch, "cancel Parley's own voice in the microphone "
            "(WebRTC AEC3), so you can talk over it on speakers; turns --barge-in on",
            "listening", _ROOM_ECHO),
    Setting("--barge-in", _switch, "listen while speaking: your speech stops the reply "
            "(use a headset or --echo-cancel; default: on with --echo-cancel)", "listening",
            _SPEECH),
    Setting("--live-transcript-s", _number, "your words while you speak: transcribed "
            "again each time you said this many seconds more, shown by voice, sent as "
            "transcript-chunk by serve (default 1; 0: only once you pause, which saves CPU)",
            "listening", _SPEECH_ENGINES),
    Setting("--echo-tail-ms", _whole, "without --barge-in, keep ignoring the microphone "
            "this long after speaking (default 300)", "listening", _SPEECH),
)
BY_DEST = {setting.dest: setting for setting in SETTINGS}


def add_settings(parser: argparse.ArgumentParser, command: str | None) -> None:
    """The settings `command` takes (all of them for the top level), defaults suppressed:
    only what was typed lands in the namespace, and `resolve` fills in the rest."""
    groups: dict[str, Any] = {}
    for setting in SETTINGS:
        if command is not None and command not in setting.commands:
            continue
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(setting.group)
        group = groups[setting.group]
        if setting.switch:
            group.add_argument(setting.flag, action="store_true", default=argparse.SUPPRESS,
                               help=f"{setting.help} ({setting.env}=1)")
        else:
            group.add_argument(setting.flag, type=_flag_parser(setting),
                               default=argparse.SUPPRESS,
                               metavar=setting.metavar or setting.dest.upper(),
                               help=setting.help)
    parser.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                        help="a TOML file of settings named like the flags (default "
                             f"{CONFIG_PATH}, or PARLEY_CONFIG)")


def _flag_parser(setting: Setting) -> Callable[[str], Any]:
    """`setting.parse` for argparse, whose own message would name the function
    ("invalid _whole value") instead of what the flag takes."""
    def parse(text: str) -> Any:
        try:
            return setting.parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {_WHAT[setting.parse]}") from None

    return parse


def resolve(given: argparse.Namespace, environ: Mapping[str, str] = os.environ
            ) -> argparse.Namespace:
    """Every setting's value: typed flag, else environment, else config file, else default."""
    values = vars(given)
    file_values = read_config(values.get("config"), environ)
    resolved = dict(values)
    for setting in SETTINGS:
        if setting.dest in values:
            continue
        if setting.flag_only:
            if setting.env in environ:
                raise ConfigError(f"{setting.env} is not read; pass {setting.flag} on the "
                                  "command line")
            resolved[setting.dest] = setting.default
        elif setting.env in environ:
            resolved[setting.dest] = _parse(setting, environ[setting.env],
                                            f"{setting.env}={environ[setting.env]!r}")
        elif setting.dest in file_values:
            path, raw = file_values[setting.dest]
            resolved[setting.dest] = _from_toml(setting, raw, path)
        else:
            resolved[setting.dest] = setting.default
    resolved[MCP_SERVERS] = file_values.get(MCP_SERVERS, (None, []))[1]
    return argparse.Namespace(**resolved)


def _parse(setting: Setting, text: str, where: str) -> Any:
    try:
        return setting.parse(text)
    except ValueError:
        raise ConfigError(f"{where} is not {_WHAT[setting.parse]} (for {setting.flag})") \
            from None


def _from_toml(setting: Setting, raw: Any, path: Path) -> Any:
    where = f"{path}: {setting.flag[2:]} = {raw!r}"
    if isinstance(raw, str):
        return _parse(setting, raw, where)
    accepted = {_switch: (bool,), _whole: (int,), _number: (int, float), _score: (int, float),
                _exchanges: (int,)}.get(setting.parse, ())
    if isinstance(raw, accepted) and (setting.switch or not isinstance(raw, bool)):
        if setting.parse not in (_number, _score):
            return raw
        try:  # a TOML number is checked as the same number typed would be
            return setting.parse(repr(float(raw)))
        except (ValueError, OverflowError):
            pass
    raise ConfigError(f"{where} is not {_WHAT[setting.parse]}")


def read_config(explicit: Path | None, environ: Mapping[str, str]) -> dict[str, tuple[Path, Any]]:
    """The config file's settings by name: `--config FILE`, PARLEY_CONFIG, or the default
    path (which may be absent). Keys are flag names (`ctx = 4096`, `llm-model = "…"`)."""
    named = explicit or (Path(environ["PARLEY_CONFIG"]) if environ.get("PARLEY_CONFIG") else None)
    path = named or CONFIG_PATH.expanduser()
    try:
        present = path.is_file()
    except OSError as exc:  # e.g. a name too long for the file system
        raise ConfigError(f"cannot use the config file {path} ({exc.strerror})") from exc
    if not present:
        if named is not None:
            raise ConfigError(f"no config file at {path}")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # Python's own limits, not a syntax error
        raise ConfigError(f"{path} is not valid TOML (a number with too many digits, or "
                          "nesting too deep)") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path} ({exc.strerror})") from exc
    servers = data.pop(mcp_config.TABLE, None)
    values = {key.replace("-", "_"): value for key, value in data.items()}
    if servers is not None:  # [mcp-servers.NAME] tables: checked now, used by every mode
        values[MCP_SERVERS] = mcp_config.servers_from(servers, str(path))
    unknown = sorted(set(values) - set(BY_DEST) - {MCP_SERVERS})
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    flag_only = sorted(BY_DEST[key].flag for key in values
                       if key in BY_DEST and BY_DEST[key].flag_only)
    if flag_only:
        raise ConfigError(f"{path}: {flag_only[0][2:]} is not read from a file; pass "
                          f"{flag_only[0]} on the command line")
    return {key: (path, value) for key, value in values.items()}


def typed(args: argparse.Namespace) -> Settings:
    """The resolved settings (`resolve`) as the typed values a session is built from."""
    values = vars(args)

    def part(kind: type) -> Any:
        return kind(**{name: values[name] for name in kind.__dataclass_fields__
                       if name in values})

    parts = {name: part(kind) for name, kind in PARTS.items()}
    parts["tools"] = replace(parts["tools"], mcp_servers=tuple(values.get(MCP_SERVERS, ())),
                             server_stderr=bool(values.get("debug")))
    return Settings(**parts, debug=bool(values.get("debug")))
