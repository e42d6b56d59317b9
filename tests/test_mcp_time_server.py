"""The reference MCP time server from PyPI (`mcp-server-time`, over stdio) as a user would
configure it: its tools listed, called directly, and called by the model in a chat."""

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assistant.cli.main import main
from tests.support.command_line import chat_through_main, without_user_settings
from tests.support.fakes import ScriptedChatModel
from tests.support.mcp_servers import notes_server_command, notes_server_env
from tests.support.nodisk import run_parley, written_outside

TOKYO = timedelta(hours=9)


@pytest.fixture
def time_server(tmp_path):
    """An mcpServers file with the time server, started by the Python running the tests
    (its console script is beside it, but PATH need not lead there)."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"time": {
        "command": sys.executable, "args": ["-m", "mcp_server_time"]}}}), encoding="utf-8")
    return path


def tokyo_reading(text: str) -> datetime:
    """The time server's answer (JSON) as a datetime, checked to be Tokyo's time now."""
    reading = json.loads(text)
    assert reading["timezone"] == "Asia/Tokyo"
    when = datetime.fromisoformat(reading["datetime"])
    assert when.utcoffset() == TOKYO
    # It read the real clock: within a few minutes of the test's own reading of it.
    assert abs(when - datetime.now(UTC)) < timedelta(minutes=5)
    return when


def test_parley_tools_lists_the_time_servers_tools_beside_parleys_own(
        monkeypatch, capsys, time_server):
    without_user_settings(monkeypatch)
    assert main(["tools", "--mcp", str(time_server)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines()
            if line and not line.startswith("·")}
    assert rows["clock"][:1] == ["Parley"]
    # The server marks both read-only: they run without asking.
    assert rows["time__get_current_time"] == ["time", "runs", "without"]
    assert rows["time__convert_time"] == ["time", "runs", "without"]
    assert f"· time ({sys.executable} -m mcp_server_time): ready, 2 tools" in out


def test_parley_tools_call_runs_get_current_time_for_a_time_zone(monkeypatch, capsys,
                                                                 time_server):
    without_user_settings(monkeypatch)
    assert main(["tools", "--mcp", str(time_server), "call", "get_current_time",
                 '{"timezone": "Asia/Tokyo"}']) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("· Asking time: get_current_time…\n")
    tokyo_reading(captured.out.split("\n", 1)[1])


def test_a_call_the_server_rejects_is_exit_code_1_with_its_reason(monkeypatch, capsys,
                                                                  time_server):
    without_user_settings(monkeypatch)
    assert main(["tools", "--mcp", str(time_server), "call", "time__get_current_time",
                 '{"timezone": "Mars/Olympus_Mons"}']) == 1
    assert "Invalid timezone" in capsys.readouterr().out
    # Arguments that break the tool's schema never reach the server.
    assert main(["tools", "--mcp", str(time_server), "call", "get_current_time",
                 '{"timezone": 9}']) == 1
    assert "Error: argument 'timezone': 9 is not of type 'string'" in capsys.readouterr().out


def test_the_model_asks_the_time_server_and_the_answer_is_in_the_reply(
        monkeypatch, capsys, time_server):
    model = ScriptedChatModel()
    readings: list[datetime] = []

    def answer_from_the_result(messages) -> str:
        """What a model does: reads the tool's result beside its call, says the time."""
        readings.append(tokyo_reading([m.content for m in messages if m.role == "tool"][-1]))
        return f"In Tokyo it is {readings[-1]:%H:%M}."

    model.enqueue('<tool_call>{"name": "time__get_current_time", "arguments": '
                  '{"timezone": "Asia/Tokyo"}}</tool_call>', answer_from_the_result)
    out = chat_through_main(monkeypatch, capsys, model, "What time is it in Tokyo?\n",
                            "--no-local-intents", "--mcp", str(time_server))
    # Piped chat waits for the server: the first message is offered its tools.
    assert "time__get_current_time" in model.offered[0]
    assert out == ("· Asking time: get_current_time…\n"
                   f"In Tokyo it is {readings[0]:%H:%M}.\n")


@pytest.mark.real
def test_mcp_servers_and_their_calls_write_nothing_of_a_conversation_to_disk(tmp_path):
    command, args = notes_server_command()
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "notes": {"command": command, "args": args, "env": notes_server_env()}}}))
    # The real `parley` with the embedded model, its servers its own children, under strace.
    chat = run_parley(tmp_path, b"What time is it in Tokyo?\n/tools\nDelete notes.txt\n",
                      "chat", "--ctx", "2048", "--mcp", str(servers), trace=True)
    assert chat.returncode == 0, chat.stderr.decode()
    assert "time__get_current_time" in chat.stdout.decode()  # /tools: the servers ran
    assert written_outside(tmp_path) == []
    called = run_parley(tmp_path, b"", "tools", "--mcp", str(servers), "call",
                        "notes__delete_note", '{"name": "notes.txt"}', trace=True)
    assert called.returncode == 0, called.stderr.decode()
    assert called.stdout.decode().endswith("Deleted notes.txt.\n")
    assert written_outside(tmp_path) == []


def test_the_readmes_configuration_works_as_written(monkeypatch, capsys, tmp_path):
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Tools from your MCP servers", 1)[1]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    config = tmp_path / "config.toml"
    config.write_text(toml, encoding="utf-8")
    without_user_settings(monkeypatch)
    # As `.venv/bin/parley` is run: Parley's bin folder need not be on PATH.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert main(["tools", "--config", str(config), "call", "get_current_time",
                 '{"timezone": "Asia/Tokyo"}']) == 0
    tokyo_reading(capsys.readouterr().out.split("\n", 1)[1])
