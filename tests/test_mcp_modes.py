"""MCP tools in replay and in `parley serve`, where no one can be asked as in chat: a
change is made where the session file says yes, and in serve only if the config trusts
the tool."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from wyoming.asr import Transcript
from wyoming.client import AsyncTcpClient
from wyoming.handle import Handled

from assistant.cli.main import main
from assistant.confirmation import Confirmation
from assistant.voice.replay import ReplayTurn, SessionAnswers
from tests.support.command_line import without_user_settings
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech
from tests.support.mcp_servers import notes_server_command, notes_server_env
from tests.support.remote_model import USAGE, ScriptedServer, chunk, stream, text
from tests.support.serving import serving

MCP_READY = re.compile(r"MCP server notes ready with (\d+) tools")
WORK_S = 120.0


def notes_file(tmp_path, **settings) -> str:
    """An --mcp file with the notes server over stdio."""
    command, args = notes_server_command()
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"notes": {
        "command": command, "args": args, "env": notes_server_env(), **settings}}}),
        encoding="utf-8")
    return str(path)


def call(tool: str, **arguments) -> str:
    return (f'<tool_call>{{"name": "notes__{tool}", "arguments": {json.dumps(arguments)}}}'
            "</tool_call>")


def last_result(messages) -> str:
    return f"Result: {[m.content for m in messages if m.role == 'tool'][-1]}"


def replayed(tmp_path, monkeypatch, capsys, turns: list[dict], *replies) -> dict:
    """`parley replay --fast` of `turns` with the notes server; the model answers from
    `replies`, the speech engines are stand-ins (the turns are typed)."""
    model = ScriptedChatModel()
    model.enqueue(*replies)
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: model)
    monkeypatch.setattr("assistant.session.engines.load_stt", lambda args: ScriptedSpeechToText({}))
    monkeypatch.setattr("assistant.session.engines.load_tts", lambda args: ToneTextToSpeech(5))
    (tmp_path / "home").mkdir()
    without_user_settings(monkeypatch, tmp_path / "home")
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    assert main(["replay", str(session), "--fast", "--no-local-intents",
                 "--mcp", notes_file(tmp_path)]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_makes_a_change_only_where_the_session_file_says_yes(tmp_path, monkeypatch,
                                                                    capsys):
    document = replayed(
        tmp_path, monkeypatch, capsys,
        [{"text": "Delete notes.txt", "confirm": "yes"},
         {"text": "Delete shopping.txt"},
         {"text": "Add a note todo.txt: milk", "confirm": "no"},
         {"text": "Which notes are left?"}],
        call("delete_note", name="notes.txt"), last_result,
        call("delete_note", name="shopping.txt"), last_result,
        call("add_note", name="todo.txt", text="milk"), last_result,
        call("list_notes"), last_result)
    replies = [turn["reply"] for turn in document["turns"]]
    assert replies[0] == "Result: Deleted notes.txt."
    assert replies[1] == ("Result: Error: the user did not answer: delete_note was not run "
                          "and nothing changed. Tell the user, without a tool.")
    assert replies[2].startswith("Result: Error: the user said no (they said: “no”): add_note "
                                 "was not run")
    assert replies[3] == "Result: shopping.txt"
    assert document["turns"][0]["input"] == {"text": "Delete notes.txt", "confirm": ["yes"]}
    # The question is asked as live, and the record shows it and the file's answer.
    asked = [(e["type"], e.get("question") or e.get("outcome"))
             for turn in document["turns"] for e in turn["events"]
             if e["type"].startswith("confirm-")]
    assert asked == [
        ("confirm-asked", "Shall I run delete note on notes, with name notes.txt?"),
        ("confirm-answered", "yes"),
        ("confirm-asked", "Shall I run delete note on notes, with name shopping.txt?"),
        ("confirm-answered", "no-answer"),
        ("confirm-asked", "Shall I run add note on notes, with name todo.txt, text milk?"),
        ("confirm-answered", "no")]
    calls = [e for e in document["turns"][0]["events"] if e["type"] == "tool-call"]
    assert [(e["name"], e["label"]) for e in calls] == [
        ("notes__delete_note", "Asking notes: delete_note")]


def test_a_reply_still_playing_when_the_next_turn_starts_is_answered_from_its_own_turn():
    records: list[object] = []
    answers = SessionAnswers()
    asking = Confirmation("notes__delete_note", "notes", "delete_note", {"name": "notes.txt"})
    answers.turn_started(ReplayTurn(1, text="Delete notes.txt", confirm=(True,)),
                         records)  # type: ignore[arg-type]
    first_reply = object()
    records.append(first_reply)
    # The next turn (during_reply_ms) starts while the first reply is still playing…
    answers.turn_started(ReplayTurn(2, text="Delete it all", confirm=(False,)),
                         records)  # type: ignore[arg-type]
    second_reply = object()
    records.append(second_reply)
    # …and the first reply asks only now: its own turn's yes, not the next turn's no.
    assert answers(asking, first_reply) == "yes"  # type: ignore[arg-type]
    assert answers(asking, second_reply) == "no"  # type: ignore[arg-type]
    assert answers(asking, first_reply) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("turn", "message"), [
    ({"text": "Delete it", "confirm": "maybe"}, 'confirm is "yes" or "no"'),
    ({"wait_s": 1, "confirm": "yes"}, "confirm goes on the turn whose reply asks"),
])
def test_a_wrong_confirm_in_the_session_file_is_one_line(tmp_path, monkeypatch, capsys,
                                                         turn, message):
    without_user_settings(monkeypatch, tmp_path)
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"turns": [turn]}), encoding="utf-8")
    assert main(["replay", str(session)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def native_call(tool: str, arguments: dict) -> list[dict]:
    """One streamed tool call, in one chunk, as Ollama sends it."""
    return [chunk({"role": "assistant", "content": "", "tool_calls": [{
                "id": "call_1", "index": 0, "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)}}]}),
            chunk({"role": "assistant", "content": ""}, finish="tool_calls"), USAGE]


async def ask(host: str, port: int, said: str) -> Handled:
    """Home Assistant's conversation agent asking, on a connection of its own."""
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Transcript(text=said, language="en").event())
        while True:
            event = await asyncio.wait_for(client.read_event(), WORK_S)
            assert event is not None
            if Handled.is_type(event.type):
                return Handled.from_event(event)


@pytest.mark.real
@pytest.mark.parametrize("trusted", [False, True], ids=["not trusted", "trusted"])
def test_serve_runs_a_change_only_if_the_config_trusts_the_tool(tmp_path, trusted):
    script = ScriptedServer(stream(native_call("notes__delete_note", {"name": "notes.txt"})),
                            stream(text("Done what I could.")),
                            stream(native_call("notes__list_notes", {})),
                            stream(text("Those are the notes.")))
    settings = {"trusted-tools": ["delete_note"]} if trusted else {}
    with script, serving("--llm-url", script.url, "--no-local-intents", "--debug",
                         "--mcp", notes_file(tmp_path, **settings)) as server:
        ready = server.stderr.wait_for(MCP_READY, WORK_S)
        assert ready is not None and ready[1] == "11", server.output()
        first = asyncio.run(ask(server.host, server.port, "Delete notes.txt"))
        second = asyncio.run(ask(server.host, server.port, "Which notes are there?"))
    assert (first.text, second.text) == ("Done what I could.", "Those are the notes.")
    deleted, listed = (next(m for m in reversed(chat["messages"]) if m["role"] == "tool")
                       for chat in (script.chats[1], script.chats[3]))
    if trusted:
        assert deleted["content"] == "Deleted notes.txt."
        assert listed["content"] == "shopping.txt"
    else:
        assert deleted["content"] == (
            "Error: it needs the user's yes, and `parley serve` has no one to ask: list the "
            "tool in trusted-tools in its MCP server's settings to let it run there: "
            "delete_note was not run and nothing changed. Tell the user, without a tool.")
        assert sorted(listed["content"].splitlines()) == ["notes.txt", "shopping.txt"]
