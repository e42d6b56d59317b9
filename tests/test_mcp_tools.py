"""Parley's MCP client against a real MCP server written with the SDK ("notes",
tests/support/mcp_server.py), over stdio and over streamable HTTP on loopback: tools
offered, asked for, refused, timed out, failing, huge, killed mid-call, missing."""

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from assistant.cli.main import main
from assistant.cli.tools import describe_servers
from assistant.confirmation import YES, answer_for
from assistant.mcp_client.config import ServerConfig
from assistant.mcp_client.hub import Status
from assistant.mcp_client.tools import McpTools
from assistant.tools import RESULT_CUT_NOTE, Failure, builtin_tools
from tests.support.command_line import chat_through_main, piped, without_user_settings
from tests.support.fakes import ScriptedChatModel
from tests.support.mcp_servers import (
    notes_server_command,
    notes_server_env,
    run_http_notes_server,
)

TRANSPORTS = ["stdio", "http"]


@contextmanager
def notes_config(transport: str, **settings) -> Iterator[ServerConfig]:
    """The notes server as Parley's settings name it: a program Parley starts (stdio), or a
    server already running on loopback (HTTP), fresh for each test."""
    if transport == "stdio":
        command, args = notes_server_command()
        yield ServerConfig("notes", command=command, args=tuple(args), env=notes_server_env(),
                           **settings)
        return
    with run_http_notes_server() as url:
        yield ServerConfig("notes", url=url, **settings)


@contextmanager
def connected(config: ServerConfig) -> Iterator[tuple[McpTools, list[str]]]:
    """Parley's tools with the server's, once it has started; the lines it warned."""
    warned: list[str] = []
    tools = McpTools([config], builtin_tools(), warned.append)
    tools.start()
    try:
        tools.wait_started()
        yield tools, warned
    finally:
        tools.close()


def config_file(tmp_path, config: ServerConfig) -> str:
    """The --mcp file a user would write for `config`."""
    entry = ({"url": config.url} if config.url else
             {"command": config.command, "args": list(config.args), "env": dict(config.env)})
    entry.update({key: sorted(value) for key, value in (
        ("trusted-tools", config.trusted_tools), ("blocked-tools", config.blocked_tools))
        if value})
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"notes": entry}}), encoding="utf-8")
    return str(path)


def notes_left(tools: McpTools) -> list[str]:
    return sorted(tools.registry.call("notes__list_notes", {}).text.splitlines())


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


def test_the_servers_tools_join_parleys_and_those_that_change_something_ask_first(transport):
    with notes_config(transport) as config, connected(config) as (tools, warned):
        listed = {tool.name: tool for tool in tools.listed()}
        names = [spec.name for spec in tools.registry.specs()]
    assert warned == []
    assert names[:3] == ["clock", "calculator", "notes__list_notes"]
    asks = sorted(name for name, tool in listed.items() if tool.asks_first)
    # delete_note is destructive, add_note not read-only, tidy has no annotations at all.
    assert asks == ["notes__add_note", "notes__delete_note", "notes__tidy"]
    assert listed["notes__read_note"].server_tool == "read_note"
    assert tools.registry.label("notes__read_note", {"name": "x"}) == "Asking notes: read_note"


def test_a_change_runs_after_a_yes_and_not_after_a_no(transport):
    answers = [answer_for("no"), YES]
    asked: list[str] = []

    def confirm(confirmation):
        asked.append(confirmation.question)
        return answers.pop(0)

    with notes_config(transport) as config, connected(config) as (tools, _):
        refused = tools.registry.call("notes__delete_note", {"name": "notes.txt"}, confirm)
        assert notes_left(tools) == ["notes.txt", "shopping.txt"]
        done = tools.registry.call("notes__delete_note", {"name": "notes.txt"}, confirm)
        assert notes_left(tools) == ["shopping.txt"]
    assert asked == ["Shall I run delete note on notes, with name notes.txt?"] * 2
    assert refused.error.kind is Failure.REFUSED
    assert refused.text == ("Error: the user said no: delete_note was not run and nothing "
                            "changed. Tell the user, without a tool.")
    assert done.text == "Deleted notes.txt." and not done.is_error


def test_a_trusted_tool_runs_without_asking_and_a_blocked_one_is_not_offered(transport):
    def never(confirmation):
        raise AssertionError(f"asked: {confirmation.question}")

    with notes_config(transport, trusted_tools=frozenset({"add_note"}),
                      blocked_tools=frozenset({"delete_note", "tidy"})) as config, \
            connected(config) as (tools, _):
        added = tools.registry.call("notes__add_note", {"name": "todo.txt", "text": "milk"},
                                    never)
        names = tools.registry.names()
        assert "todo.txt" in notes_left(tools)
    assert not added.is_error
    assert "notes__delete_note" not in names and "notes__tidy" not in names


def test_arguments_that_break_the_schema_never_reach_the_server(transport):
    with notes_config(transport) as config, connected(config) as (tools, _):
        missing = tools.registry.call("notes__delete_note", {}, lambda c: YES)
        wrong = tools.registry.call("notes__add_note", {"name": "a.txt", "text": 5},
                                    lambda c: YES)
        assert notes_left(tools) == ["notes.txt", "shopping.txt"]
    assert missing.error.kind is Failure.BAD_ARGUMENTS
    assert missing.text == "Error: 'name' is a required property"
    assert wrong.text == "Error: argument 'text': 5 is not of type 'string'"


def test_a_tool_that_raises_is_an_error_the_model_reads_and_the_server_stays(transport):
    with notes_config(transport) as config, connected(config) as (tools, warned):
        output = tools.registry.call("notes__fail", {})
        still = tools.registry.call("notes__read_note", {"name": "shopping.txt"})
    assert output.is_error and output.text.startswith("Error: fail failed: Error executing tool")
    assert still.text == "eggs, milk, bread"
    assert warned == []


def test_a_huge_result_is_cut_to_4000_characters_and_pictures_are_named(transport):
    with notes_config(transport) as config, connected(config) as (tools, _):
        huge = tools.registry.call("notes__huge", {})
        chart = tools.registry.call("notes__chart", {})
    assert len(huge.text) == 4000 and huge.text.endswith(RESULT_CUT_NOTE)
    lines = chart.text.splitlines()
    assert lines[1].startswith("[image (image/png, about ") and lines[1].endswith("not shown]")
    assert lines[2] == "[resource notes://chart-data.csv, text/csv not shown]"


def test_a_call_past_the_timeout_withdraws_the_servers_tools_until_restarted(transport):
    # 8 s: enough to start on a loaded machine (0.6 s here, 1.3 s beside the test suite).
    with notes_config(transport, timeout_s=8.0) as config, \
            connected(config) as (tools, warned):
        output = tools.registry.call("notes__wait", {"seconds": 30})
        withdrawn = {n for n in tools.registry.names() if n.startswith("notes__")}
        assert tools.restart_failed() == ["notes"]
        tools.wait_started()
        back = tools.registry.call("notes__read_note", {"name": "notes.txt"})
    assert output.error.kind is Failure.RAISED
    assert "did not answer within 8 s" in output.text
    assert withdrawn == set()
    assert len(warned) == 1 and warned[0].startswith("MCP server 'notes' (")
    assert warned[0].endswith("its tools are withdrawn (/tools starts it again).")
    assert back.text == "call the plumber on Tuesday"


def test_the_server_killed_mid_call_is_one_line_and_its_tools_are_withdrawn(transport):
    with notes_config(transport) as config, connected(config) as (tools, warned):
        pid = int(tools.registry.call("notes__process_id", {}).text)
        results = []
        call = threading.Thread(target=lambda: results.append(
            tools.registry.call("notes__wait", {"seconds": 60})))
        call.start()
        # However far the call got, the server is gone: the outcome is the same.
        os.kill(pid, signal.SIGKILL)
        call.join(30)
        state = tools.servers[0]
        names = tools.registry.names()
    assert not call.is_alive()
    assert results[0].error.kind is Failure.RAISED
    assert results[0].text.startswith("Error: the MCP server 'notes' failed:")
    assert state.status is Status.FAILED and len(warned) == 1
    assert not any(name.startswith("notes__") for name in names)


def test_a_server_that_exits_while_idle_is_found_out_and_its_tools_withdrawn(
        transport, monkeypatch):
    monkeypatch.setattr("assistant.mcp_client.hub.WATCH_S", 0.5)
    with notes_config(transport) as config, connected(config) as (tools, warned):
        pid = int(tools.registry.call("notes__process_id", {}).text)
        time.sleep(2)  # checked four times meanwhile: a server that answers stays
        alive = list(warned)
        os.kill(pid, signal.SIGKILL)  # no call is being made: only the check finds it out
        gone = wait_for(lambda: warned, 20)
        names = tools.registry.names()
    assert alive == []
    assert gone and len(warned) == 1, warned
    assert warned[0].startswith("MCP server 'notes' (") and "it stopped answering" in warned[0]
    assert warned[0].endswith("its tools are withdrawn (/tools starts it again).")
    assert names == {"clock", "calculator"}


def test_closing_while_a_server_is_still_starting_ends_its_process():
    marker = f"import time; time.sleep(4242)  # parley-test-{os.getpid()}"
    hung = ServerConfig("hung", command=sys.executable, args=("-c", marker), timeout_s=30)
    tools = McpTools([hung], builtin_tools(), lambda _: None)
    tools.start()
    assert wait_for(lambda: processes_running(marker), 10)  # it answers nothing, ever
    tools.close()
    assert processes_running(marker) == []


def wait_for(ready, within_s: float):
    """`ready()` once it is true, polled; its last value when the time is up."""
    deadline = time.monotonic() + within_s
    while not (value := ready()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def processes_running(marker: str) -> list[int]:
    """The processes whose command line holds `marker` (zombies are not running)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes()
                    and ") Z " not in (entry / "stat").read_text()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_server_whose_command_does_not_exist_is_one_line_and_parley_goes_on(
        monkeypatch, capsys, tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "notes": {"command": "no-such-notes-server", "args": ["--stdio"]}}}))
    model = ScriptedChatModel()
    model.enqueue("Hello there.")
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: model)
    without_user_settings(monkeypatch)
    piped(monkeypatch, "hi\n")
    assert main(["chat", "--mcp", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Hello there.\n"
    assert captured.err == (
        "! MCP server 'notes' (no-such-notes-server --stdio): cannot start it: no program "
        "'no-such-notes-server' (check the command, or install the server); its tools are "
        "not offered (/tools starts it again).\n")


def test_chat_asks_before_a_change_and_the_typed_answer_decides(monkeypatch, capsys,
                                                                 tmp_path, transport):
    model = ScriptedChatModel()

    def call(tool: str, **arguments) -> str:
        return f'<tool_call>{{"name": "notes__{tool}", "arguments": {json.dumps(arguments)}}}' \
               '</tool_call>'

    def last_result(messages) -> str:
        return f"Result: {[m.content for m in messages if m.role == 'tool'][-1]}"

    model.enqueue(call("delete_note", name="notes.txt"), last_result,
                  call("delete_note", name="shopping.txt"), last_result,
                  call("list_notes"), last_result)
    with notes_config(transport) as config:
        out = chat_through_main(
            monkeypatch, capsys, model,
            "Delete notes.txt\nyes\nDelete shopping.txt\nWhat do you mean?\n"
            "Which notes are left?\n",
            "--no-local-intents", "--mcp", config_file(tmp_path, config))
    assert out == (
        "· Asking notes: delete_note…\n"
        "? Shall I run delete note on notes, with name notes.txt? (yes/no) yes\n"
        "Result: Deleted notes.txt.\n"
        "· Asking notes: delete_note…\n"
        "? Shall I run delete note on notes, with name shopping.txt? (yes/no) What do you "
        "mean?\n"
        "· notes__delete_note: Error: the user did not say yes (they said: “What do you \n"
        "mean?”): delete_note was not run and nothing changed. Tell the user, without a \n"
        "tool.\n"
        "Result: Error: the user did not say yes (they said: “What do you mean?”): "
        "delete_note was not run and nothing changed. Tell the user, without a tool.\n"
        "· Asking notes: list_notes…\n"
        "Result: shopping.txt\n")


def test_a_tool_name_in_the_settings_the_server_lacks_is_one_line_and_the_rest_work():
    command, args = notes_server_command()
    typo = ServerConfig("notes", command=command, args=tuple(args), env=notes_server_env(),
                        confirm_tools=frozenset({"read_notes"}))
    with connected(typo) as (tools, warned):
        offered = "notes__read_note" in tools.registry.names()
    assert offered
    assert warned == ["MCP server 'notes' has no tool named in confirm-tools: read_notes (its "
                      "tools: add_note, chart, delete_note, fail, huge, list_notes, "
                      "process_id, read_note, signed_in, tidy, wait); check the names in its "
                      "settings."]


def test_a_working_folder_that_does_not_exist_is_named_as_the_problem(tmp_path):
    command, args = notes_server_command()
    lost = ServerConfig("notes", command=command, args=tuple(args), env=notes_server_env(),
                        cwd=str(tmp_path / "gone"))
    with connected(lost) as (_, warned):
        pass
    assert len(warned) == 1
    assert f"cannot start it: no folder '{tmp_path / 'gone'}' (check its cwd)" in warned[0]


def test_a_server_that_answers_garbage_is_one_line_and_offers_no_tools():
    garbage = ServerConfig("noise", command=sys.executable, args=(
        "-c", "import time; print('this is not JSON-RPC', flush=True); time.sleep(60)"),
        timeout_s=3.0)
    with connected(garbage) as (tools, warned):
        state = tools.servers[0]
        names = tools.registry.names()
    assert state.status is Status.FAILED
    assert names == {"clock", "calculator"}
    assert len(warned) == 1 and warned[0].startswith("MCP server 'noise' (")
    assert warned[0].endswith("its tools are not offered (/tools starts it again).")


def test_a_disabled_server_is_not_started_and_says_so():
    command, args = notes_server_command()
    off = ServerConfig("notes", command=command, args=tuple(args), env=notes_server_env(),
                       enabled=False)
    with connected(off) as (tools, warned):
        names = tools.registry.names()
        lines = describe_servers(tools)
    assert names == {"clock", "calculator"} and warned == []
    assert lines == [f"notes ({command} {' '.join(args)}): disabled"]


def test_an_http_servers_headers_are_sent_with_every_request():
    with notes_config("http") as plain:
        signed = ServerConfig("notes", url=plain.url, headers={"Authorization": "Bearer sam"})
        with connected(signed) as (tools, _):
            said = tools.registry.call("notes__signed_in", {}).text
        with connected(plain) as (tools, _):
            unsigned = tools.registry.call("notes__signed_in", {}).text
    assert (said, unsigned) == ("Signed in as sam.", "Not signed in.")

