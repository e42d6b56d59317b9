"""Property tests for text Parley reads from outside: session files, settings (config file
and environment), the model's tool-call text and conversation_history arguments.

Whatever the input, the outcome is Parley's own: a value, or its clear error (one line
and exit code 2 on the command line, an error text for the model), never a traceback.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from assistant.cli.main import main
from assistant.cli.settings import SETTINGS
from assistant.errors import ConfigError
from assistant.history_tool import history_tool
from assistant.session import engines
from assistant.tools import MAX_RESULT_CHARS, ToolRegistry
from assistant.voice.replay import MAX_WAIT_S, SessionError, load_session
from memory.history import Message
from memory.search import HistorySearch
from models.base import TextChunk, ToolCallChunk
from models.toolcalls import CLOSE, OPEN, ToolCallScanner, render_call
from tests.support.command_line import without_user_settings

# The machine is shared and noisy: no deadline; nothing saved into the repository.
PROPERTY = settings(max_examples=100, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def hypothesis_storage(tmp_path_factory):
    """Hypothesis caches (Unicode tables, the code's constants) in its storage folder even
    without a database: under pytest's temporary folder here, never in the repository."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


HUGE = ("9" * 5000, "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000)
"""Inputs Python's own parsers refuse with something other than a decode error."""

SCALARS = (st.none() | st.booleans() | st.integers() | st.sampled_from([10 ** 400, -2 ** 70])
           | st.floats() | st.text(max_size=12))
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)


def one_line_error(err: str) -> str:
    """The one `parley: …` line main() prints for a user error; fails on anything else."""
    assert "Traceback" not in err
    assert err.startswith("parley: ") and err.endswith("\n") and err.count("\n") == 1, err
    return err[len("parley: "):-1]


# -- session files -------------------------------------------------------------------------

CLIP_SAMPLES = 1600


@pytest.fixture
def session_dir(tmp_path: Path) -> Path:
    """A session folder with a good clip, an empty one, a corrupt one and a sub-folder."""
    soundfile.write(tmp_path / "ok.wav", np.full(CLIP_SAMPLES, 0.25, np.float32), 16000,
                    subtype="PCM_16")
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "junk.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 4)
    (tmp_path / "folder").mkdir()
    return tmp_path


AUDIO_NAMES = st.sampled_from(
    ["ok.wav", "empty.wav", "junk.wav", "missing.wav", "folder", "", "/", "../", "a" * 300,
     "x\x00y", "ok.wav/inner"]) | st.text(st.characters(blacklist_characters="/."), max_size=12)
TURN_VALUES = (JSON_VALUES | AUDIO_NAMES | st.floats(-1e3, MAX_WAIT_S * 2)
               | st.integers(-10, 10 ** 7) | st.sampled_from([10 ** 400, 1e308, True]))
TURNS = st.fixed_dictionaries({}, optional={
    "text": TURN_VALUES, "audio": AUDIO_NAMES | TURN_VALUES, "wait_s": TURN_VALUES,
    "during_reply_ms": TURN_VALUES, "pause": TURN_VALUES}) | JSON_VALUES
SESSIONS = (st.lists(TURNS, max_size=4).map(lambda turns: {"turns": turns})
            | st.lists(TURNS, max_size=4) | JSON_VALUES)


def check_session(path: Path) -> list | None:
    """load_session's result, or None after checking its error names the file."""
    try:
        return load_session(path)
    except SessionError as exc:
        assert str(path) in str(exc) and str(exc).strip()
        return None


@PROPERTY
@given(SESSIONS)
@example({"turns": [{"audio": "x\x00y"}]})
@example({"turns": [{"audio": "a" * 300}]})
@example({"turns": [{"audio": "ok.wav", "during_reply_ms": True}]})
@example({"turns": [{"audio": "ok.wav", "during_reply_ms": 10 ** 400}]})
def test_any_json_session_loads_or_gives_the_session_error(session_dir, session):
    path = session_dir / "session.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    turns = check_session(path)
    for turn in turns or []:
        kinds = [turn.text is not None, turn.wait_s is not None, turn.pcm is not None]
        assert kinds.count(True) == 1
        if turn.wait_s is not None:
            assert 0 <= turn.wait_s <= MAX_WAIT_S
        if turn.during_reply_ms is not None:
            # It is slept on during replay: it must be a usable number of seconds.
            assert isinstance(turn.during_reply_ms, int) and 0 <= turn.during_reply_ms
            assert not isinstance(turn.during_reply_ms, bool)
            assert math.isfinite(turn.during_reply_ms / 1000) and \
                turn.during_reply_ms / 1000 <= MAX_WAIT_S


@PROPERTY
@given(st.binary(max_size=200) | st.sampled_from([h.encode() for h in HUGE]) |
       st.sampled_from([b"\xef\xbb\xbf[]", b'{"turns": [{"wait_s": NaN}]}', b"\xff\xfe\x00"]))
@example(b'{"turns": [{"wait_s": ' + b"1" * 5000 + b"}]}")
def test_any_bytes_as_a_session_are_one_line_and_exit_2(session_dir, capsys, raw):
    path = session_dir / "session.json"
    path.write_bytes(raw)
    capsys.readouterr()
    assert main(["replay", str(path)]) == 2
    assert str(path) in one_line_error(capsys.readouterr().err)


@st.composite
def valid_sessions(draw) -> list[dict]:
    text = st.text(min_size=1).filter(str.strip)
    turn = (text.map(lambda t: {"text": t})
            | st.integers(0, MAX_WAIT_S).map(lambda s: {"wait_s": s})
            | st.floats(0, MAX_WAIT_S).map(lambda s: {"wait_s": s})
            | st.just({"audio": "ok.wav"})
            | st.integers(0, 60_000).map(lambda ms: {"audio": "ok.wav", "during_reply_ms": ms}))
    return draw(st.lists(turn, min_size=1, max_size=6))


@PROPERTY
@given(valid_sessions(), st.booleans())
def test_a_valid_session_parses_to_the_turns_given(session_dir, turns, bare_list):
    path = session_dir / "session.json"
    path.write_text(json.dumps(turns if bare_list else {"turns": turns}), encoding="utf-8")
    loaded = load_session(path)
    assert [turn.index for turn in loaded] == list(range(1, len(turns) + 1))
    for given_turn, turn in zip(turns, loaded, strict=True):
        if "text" in given_turn:
            assert turn.text == given_turn["text"]
        elif "wait_s" in given_turn:
            assert turn.wait_s == given_turn["wait_s"]
        else:
            assert turn.audio_path == (session_dir / "ok.wav").resolve()
            assert turn.pcm is not None and len(turn.pcm) == CLIP_SAMPLES
            assert turn.during_reply_ms == given_turn.get("during_reply_ms")


# -- settings: config file and environment -------------------------------------------------

ENV_NAMES = [setting.env for setting in SETTINGS]
KEYS = st.sampled_from([s.flag[2:] for s in SETTINGS] + [s.dest for s in SETTINGS]
                       + ["colour", "config", "a.b", '"ctx"', "[table]"])
TOML_VALUES = (st.sampled_from(["1", "-1", "0", "true", '"yes"', '""', '"auto"', "3.5", "inf",
                                "-inf", "nan", "1e308", "1e309", "0x10", "1_000", "[1, 2]",
                                "{a = 1}", "1979-05-27", '"\\u0000"', "'''\nx\n'''", *HUGE])
               | st.integers().map(str) | st.floats().map(str)
               | st.text(max_size=10).map(json.dumps))
TOML_TEXT = st.lists(st.builds("{} = {}".format, KEYS, TOML_VALUES) | st.text(max_size=20),
                     max_size=5).map("\n".join)
ENV_TEXT = st.sampled_from(["", " 12 ", "-1", "0", "inf", "nan", "1e400", "9" * 5000, "yes",
                            "auto", "all", "1_0", "\u0663", "3.5"]) | st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


@pytest.fixture
def chat_args(monkeypatch):
    """Runs main() as `parley chat` does up to loading the model, which it stops at; the
    settings it got are recorded."""
    captured: list = []
    building: list = []
    real_load_conversation = engines.load_conversation

    def load_conversation(settings, *args, **kwargs):
        building[:] = [settings]
        return real_load_conversation(settings, *args, **kwargs)

    def load_model(model_settings):
        captured.extend(building)  # the settings got as far as loading the model
        raise ConfigError("stopped by the test")

    monkeypatch.setattr(engines, "load_conversation", load_conversation)
    monkeypatch.setattr(engines, "load_model", load_model)
    monkeypatch.setattr(engines, "load_local_intents", lambda args: None)
    without_user_settings(monkeypatch)
    return captured


def run_chat_settings(argv: list[str], capsys, captured: list) -> None:
    """main() gives one line and exit 2; settings that got through also build the voice
    settings (segmenter, echo) or give the configuration error."""
    capsys.readouterr()
    captured.clear()
    assert main(argv) == 2
    message = one_line_error(capsys.readouterr().err)
    assert (message == "stopped by the test") == bool(captured)
    for args in captured:
        for build in (engines.segmenter_settings, engines.voice_settings):
            try:
                build(args.listening)
            except ConfigError as exc:
                assert "\n" not in str(exc)


@PROPERTY
@given(TOML_TEXT | st.text(max_size=60), st.booleans())
@example("max-utterance-s = 1e308", False)
@example("pre-roll-ms = 1" + "0" * 400, False)
def test_any_config_file_gives_settings_or_one_line_and_exit_2(tmp_path, capsys, chat_args,
                                                                monkeypatch, text, by_flag):
    config = tmp_path / "parley.toml"
    config.write_text(text, encoding="utf-8")
    with monkeypatch.context() as env:
        argv = ["--config", str(config), "chat"]
        if not by_flag:
            env.setenv("PARLEY_CONFIG", str(config))
            argv = ["chat"]
        run_chat_settings(argv, capsys, chat_args)


@PROPERTY
@given(st.binary(max_size=80))
def test_any_bytes_as_a_config_file_give_one_line_and_exit_2(tmp_path, capsys, chat_args, raw):
    config = tmp_path / "parley.toml"
    config.write_bytes(raw)
    run_chat_settings(["--config", str(config), "chat"], capsys, chat_args)


@PROPERTY
@given(st.dictionaries(st.sampled_from(ENV_NAMES), ENV_TEXT, max_size=4),
       st.sampled_from([None, "", "missing.toml", "a" * 5000, "/", "x" * 255 + "/c.toml"]))
@example({"PARLEY_MAX_UTTERANCE_S": "inf"}, None)
@example({"PARLEY_PRE_ROLL_MS": "1" + "0" * 400}, None)
def test_any_environment_gives_settings_or_one_line_and_exit_2(tmp_path, capsys, chat_args,
                                                                monkeypatch, values, config):
    with monkeypatch.context() as env:
        for name, value in values.items():
            env.setenv(name, value)
        if config is not None:
            env.setenv("PARLEY_CONFIG", str(tmp_path / config) if config else "")
        run_chat_settings(["chat"], capsys, chat_args)


# -- tool calls in the model's text --------------------------------------------------------

CALL_TEXT = st.lists(st.sampled_from([OPEN, CLOSE, "<tool_", "</tool", "{", "}", '"name"', ":",
                                      '"arguments"', "[", "]", ",", '"x"', "1", "\u00e9\u2603",
                                      "\n", *HUGE]) | st.text(max_size=8),
                     max_size=12).map("".join)


def scan(text: str, cuts: list[int]) -> list[TextChunk | ToolCallChunk]:
    """The scanner's output for `text` streamed in pieces cut at `cuts`."""
    scanner, out, last = ToolCallScanner(), [], 0
    for cut in sorted({min(c, len(text)) for c in cuts}) + [len(text)]:
        out.extend(scanner.feed(text[last:cut]))
        last = cut
    out.extend(scanner.finish())
    merged: list = []  # adjacent text pieces are one text, however the stream was cut
    for chunk in out:
        if isinstance(chunk, TextChunk) and merged and isinstance(merged[-1], TextChunk):
            merged[-1] = TextChunk(merged[-1].text + chunk.text)
        elif not isinstance(chunk, TextChunk) or chunk.text:
            merged.append(chunk)
    return merged


@PROPERTY
@given(CALL_TEXT | st.text(), st.lists(st.integers(0, 200), max_size=6))
def test_any_model_text_gives_text_and_calls_however_it_is_streamed(text, cuts):
    chunks = scan(text, cuts)
    assert chunks == scan(text, [])
    for chunk in chunks:
        assert isinstance(chunk, TextChunk | ToolCallChunk)
        if isinstance(chunk, ToolCallChunk):
            assert isinstance(chunk.arguments, dict) and isinstance(chunk.name, str)
            assert chunk.error is None or chunk.error.strip()
    if not any(isinstance(c, ToolCallChunk) for c in chunks):
        assert "".join(c.text for c in chunks) == text


ARGUMENTS = st.dictionaries(st.text(max_size=8), st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 12, 10 ** 12) | st.floats(allow_nan=False)
    | st.text(max_size=10), lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8), max_size=4)
NO_TAG = st.text(max_size=40).filter(lambda t: OPEN not in t)


@PROPERTY
@given(NO_TAG, st.text(min_size=1, max_size=20), ARGUMENTS, NO_TAG,
       st.lists(st.integers(0, 200), max_size=6))
def test_a_well_formed_call_in_random_text_is_found_with_its_arguments(before, name, arguments,
                                                                       after, cuts):
    call = render_call(name, arguments)
    # A closing tag inside an argument ends the block early: the format cannot carry one.
    if CLOSE in call[len(OPEN):-len(CLOSE)]:
        return
    chunks = scan(before + call + after, cuts)
    calls = [chunk for chunk in chunks if isinstance(chunk, ToolCallChunk)]
    assert calls == [ToolCallChunk(name, arguments)]
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert text == before + after


# -- conversation_history arguments --------------------------------------------------------

CONTENTS = st.text(max_size=60) | st.sampled_from(["", "billing port 8101 " * 400, "é" * 9000])
MESSAGES = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), CONTENTS,
                              st.text(max_size=200)), max_size=6)
HISTORY_VALUES = (JSON_VALUES | st.integers(-3, 9) | st.sampled_from(["user", "assistant"])
                  | st.text(min_size=4000, max_size=6000) | st.sampled_from([10 ** 30, -10 ** 30]))
HISTORY_ARGUMENTS = st.dictionaries(
    st.sampled_from(["query", "message", "offset", "speaker", "page"]), HISTORY_VALUES, max_size=4)


def history_registry(said: list[tuple[str, str, str]]) -> ToolRegistry:
    messages = [Message(seq, role, content, tool="clock" if role == "tool" else None,
                        query=query if role == "tool" else None)
                for seq, (role, content, query) in enumerate(said, start=1)]
    return ToolRegistry([history_tool(HistorySearch(messages))])


@PROPERTY
@given(MESSAGES, HISTORY_ARGUMENTS)
@example([("user", "hello", "")], {"query": "zebra " * 1000})
@example([("user", "billing port 8101 " * 400, "")], {"message": 1, "offset": 10})
def test_any_history_arguments_give_a_result_for_the_model_within_the_cap(said, arguments):
    tools = history_registry(said)
    assert isinstance(tools.label("conversation_history", arguments), str)
    output = tools.call("conversation_history", arguments)
    result, is_error = output.text, output.is_error
    assert isinstance(result, str) and result.strip()
    # Within the cap, so the registry never cuts off what the tool says to do next.
    assert len(result) <= MAX_RESULT_CHARS, len(result)
    assert not result.startswith("Error: conversation_history failed"), result
    if is_error:
        assert result.startswith("Error: ")


@PROPERTY
@given(st.text(min_size=1, max_size=20_000))
@example("billing port 8101 " * 1000)
def test_reading_a_message_page_by_page_through_the_tool_gives_it_exactly(content):
    tools = history_registry([("user", content, "")])
    pages, offset = [], 0
    while True:
        output = tools.call("conversation_history", {"message": 1, "offset": offset})
        result = output.text
        assert not output.is_error and len(result) <= MAX_RESULT_CHARS
        header, rest = result.split("\n", 1)
        shown = re.search(r"characters ([\d,]+)–([\d,]+) of", header)
        assert shown is not None
        start, end = (int(group.replace(",", "")) for group in shown.groups())
        body, footer = rest.rsplit("\n", 1)
        assert start == offset and body == content[start:end]
        pages.append(body)
        following = re.search(r'"offset": (\d+)', footer)
        if following is None:
            assert footer == "[end of message]"
            break
        offset = int(following.group(1))
        assert offset == end
    assert "".join(pages) == content
