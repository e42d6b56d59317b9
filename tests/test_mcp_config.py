"""MCP configuration and the pure parts of the client: the files a user writes, the names
the model sees, which tools ask first, what the model reads of a result, and the yes/no."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from assistant.cli.main import build_parser
from assistant.cli.settings import resolve, typed
from assistant.confirmation import Confirmation, heard_answer
from assistant.errors import ConfigError
from assistant.mcp_client.config import read_mcp_file
from assistant.mcp_client.tools import model_name, needs_yes, result_text, schema_check
from assistant.session.engines import configured_servers
from tests.support.command_line import without_user_settings

CLAUDE_DESKTOP = {"mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "Asia/Tokyo"],
             "env": {"TZ": "UTC"}},
    "notes": {"url": "http://127.0.0.1:8123/mcp", "headers": {"Authorization": "Bearer k"},
              "disabled": True, "autoApprove": ["read_note"]},
}}


def written(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_file_other_mcp_clients_read_is_read_as_it_is(tmp_path):
    servers = read_mcp_file(written(tmp_path, "claude.json", json.dumps(CLAUDE_DESKTOP)))
    time, notes = servers
    assert (time.name, time.command, time.args, dict(time.env)) == (
        "time", "uvx", ("mcp-server-time", "--local-timezone", "Asia/Tokyo"), {"TZ": "UTC"})
    assert time.enabled and time.url is None and time.timeout_s == 30
    assert (notes.url, dict(notes.headers), notes.enabled) == (
        "http://127.0.0.1:8123/mcp", {"Authorization": "Bearer k"}, False)
    # Another client's "always allow" list is not Parley's trust: it still asks.
    assert notes.trusted_tools == frozenset()


def test_a_toml_file_names_parleys_own_keys(tmp_path):
    path = written(tmp_path, "servers.toml", """
[mcp-servers.notes]
command = "notes-server"
allowed-tools = ["read_note", "delete_note"]
blocked-tools = ["delete_note"]
confirm-tools = ["read_note"]
trusted-tools = ["add_note"]
timeout-s = 5
""")
    (notes,) = read_mcp_file(path)
    assert notes.uses("read_note") and not notes.uses("delete_note")
    assert not notes.uses("list_notes")  # not among the allowed
    assert notes.confirm_tools == {"read_note"} and notes.trusted_tools == {"add_note"}
    assert notes.timeout_s == 5.0
    # A name its lists give that the server turns out not to have is said once it is listed.
    assert notes.names_not_found({"read_note", "delete_note", "list_notes"}) == [
        "trusted-tools: add_note"]


def test_a_tool_may_be_named_as_parley_tools_shows_it(tmp_path):
    (notes,) = read_mcp_file(written(tmp_path, "mcp.json", json.dumps({"mcpServers": {
        "notes": {"command": "n", "confirm-tools": ["notes__read_note"],
                  "trusted-tools": ["delete_note"]}}})))
    assert notes.confirm_tools == {"read_note"} and notes.trusted_tools == {"delete_note"}


def test_the_config_file_holds_servers_and_the_mcp_file_replaces_one_of_the_same_name(
        tmp_path, monkeypatch):
    without_user_settings(monkeypatch, tmp_path)
    config = written(tmp_path, "config.toml", """
ctx = 4096
[mcp-servers.time]
command = "mcp-server-time"
[mcp-servers.files]
url = "http://127.0.0.1:9/mcp"
""")
    mcp = written(tmp_path, "mcp.json", json.dumps(
        {"mcpServers": {"time": {"command": "other-time-server"}}}))
    args = resolve(build_parser().parse_args(["chat", "--config", str(config),
                                               "--mcp", str(mcp)]), {})
    servers = {s.name: s for s in configured_servers(typed(args).tools)}
    assert args.ctx == 4096
    assert servers["time"].command == "other-time-server"
    assert servers["files"].url == "http://127.0.0.1:9/mcp"


@pytest.mark.parametrize(("text", "message"), [
    ('{"mcpServers": {"x": {"command": "a", "url": "http://h/mcp"}}}', "not both"),
    ('{"mcpServers": {"x": {}}}', "needs either a command"),
    ('{"mcpServers": {"x": {"command": "a", "colour": "red"}}}', "unknown key 'colour'"),
    ('{"mcpServers": {"bad name": {"command": "a"}}}', "letters, digits"),
    ('{"mcpServers": {"x": {"url": "ftp://h"}}}', "http:// or https://"),
    ('{"mcpServers": {"x": {"command": "a", "timeout-s": 0}}}', "timeout-s"),
    ('{"mcpServers": {"x": {"command": "a", "args": "one two"}}}', "list of strings"),
    ('{"servers": {}}', 'no "mcpServers" object'),
    ('{"mcpServers": ', "not valid JSON"),
    ("[mcp-servers.x]\ncommand = 3", "command must be"),
    ("ctx = 1", "holds [mcp-servers.NAME] tables only"),
    ('{"mcpServers": {"x": {"command": "a", "disabled": "false"}}}', "disabled must be true"),
    ('{"mcpServers": {"x": {"type": "sse", "url": "http://h/sse"}}}', "SSE servers"),
])
def test_a_mistake_in_the_file_is_one_line_naming_the_file_server_and_key(tmp_path, text,
                                                                           message):
    path = written(tmp_path, "mcp.conf", text)
    with pytest.raises(ConfigError, match="mcp.conf") as caught:
        read_mcp_file(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_or_binary_file_says_what_mcp_takes(tmp_path):
    with pytest.raises(ConfigError, match="no MCP server file"):
        read_mcp_file(tmp_path / "absent.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_mcp_file(binary)


def test_tool_names_are_prefixed_by_their_server_and_never_collide():
    taken = {"clock", "time__get_current_time"}
    assert model_name("time", "get_current_time", set()) == "time__get_current_time"
    assert model_name("time", "get_current_time", taken) == "time__get_current_time_2"
    assert model_name("files", "read/file.v2", set()) == "files__read_file_v2"


@given(server=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", fullmatch=True),
       tools=st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=8))
def test_every_name_is_one_a_model_server_accepts_and_each_is_new(server, tools):
    taken: set[str] = {"clock", "calculator"}
    for tool in tools:
        name = model_name(server, tool, taken)
        assert name not in taken
        assert len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-")
                                       for c in name)
        taken.add(name)


def tool(name: str, **hints) -> Tool:
    return Tool(name=name, input_schema={"type": "object"},
                annotations=ToolAnnotations(**hints) if hints else None)


def test_only_tools_the_server_calls_read_only_run_without_asking(tmp_path):
    (config,) = read_mcp_file(written(tmp_path, "m.toml", """
[mcp-servers.notes]
command = "n"
confirm-tools = ["list_notes"]
trusted-tools = ["add_note"]
"""))
    assert not needs_yes(tool("read_note", read_only_hint=True), config)
    assert needs_yes(tool("delete_note", read_only_hint=False, destructive_hint=True), config)
    assert needs_yes(tool("tidy"), config)  # no annotations: it may change anything
    assert needs_yes(tool("wipe", read_only_hint=True, destructive_hint=True), config)
    assert needs_yes(tool("list_notes", read_only_hint=True), config)  # listed by the user
    assert not needs_yes(tool("add_note", read_only_hint=False), config)  # trusted


def test_images_and_resources_are_named_not_included():
    result = CallToolResult(content=[
        TextContent(type="text", text="Chart of this week's notes."),
        ImageContent(type="image", data="iVBORw0KGgo=" * 100, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="notes://chart-data.csv", mime_type="text/csv", text="a,b\n1,2\n" * 1000)),
    ])
    text = result_text(result)
    assert text.startswith("Chart of this week's notes.\n[image (image/png, about 900 bytes)")
    assert "[resource notes://chart-data.csv, text/csv not shown]" in text
    assert "a,b" not in text and "iVBOR" not in text


def test_a_result_with_only_structured_content_is_read_as_its_json():
    result = CallToolResult(content=[], structured_content={"temperature": 21.5})
    assert result_text(result) == '{"temperature": 21.5}'


def test_arguments_are_checked_against_the_whole_input_schema():
    check = schema_check({"type": "object", "required": ["timezone"], "properties": {
        "timezone": {"type": "string", "pattern": "^[A-Za-z_]+/[A-Za-z_]+$"},
        "count": {"type": "integer", "minimum": 1}}})
    assert check({"timezone": "Asia/Tokyo"}) is None
    assert "'timezone' is a required property" in check({})
    assert "argument 'timezone'" in check({"timezone": "Tokyo"})
    assert "argument 'count'" in check({"timezone": "Asia/Tokyo", "count": 0})
    broken = schema_check({"type": "object", "properties": {"x": {"type": "colour"}}})
    assert "input schema is invalid" in broken({})
    nowhere = schema_check({"type": "object", "properties": {"x": {"$ref": "#/$defs/gone"}}})
    assert nowhere({"x": 1}).startswith("the tool's own input schema cannot be used "
                                        "(PointerToNowhere: '/$defs/gone' does not exist")


def test_the_question_names_the_tool_its_server_and_what_it_will_do():
    asking = Confirmation("notes__delete_note", "notes", "delete_note", {"name": "notes.txt"})
    assert asking.question == "Shall I run delete note on notes, with name notes.txt?"
    assert Confirmation("t__tidy", "t", "tidy").question == "Shall I run tidy on t?"
    path = "/home/sam/" + "very/" * 30 + "notes.txt"
    long = Confirmation("f__delete", "f", "delete", {"path": path})
    assert long.question == f"Shall I run delete on f, with path {path[:80]}…?"
    assert long.question_in_full == f"Shall I run delete on f, with path {path}?"  # typed chat


@pytest.mark.parametrize(("said", "meaning"), [
    ("Yes.", True), ("yeah, go ahead", True), ("Sure!", True), ("okay", True), ("y", True),
    ("Do it.", True), ("Um, yes please.", True), ("Yes, delete it.", True),
    ("Go ahead and delete notes.txt", True), ("Yes, go ahead then, thank you very much", True),
    ("No.", False), ("no, don't", False), ("yes... no, wait", False), ("Do not.", False),
    ("Nope", False), ("What is the weather?", None), ("", None), ("   ", None),
    # questions and new requests hold words that can say yes, and are not a yes
    ("What do you mean?", None), ("Is that the right one?", None), ("do what", None),
    ("Okay, which note is that?", None), ("Can you do it tomorrow?", None),
    ("right now, what time is it", None), ("Okay, tell me a joke.", None),
    ("Sure, but first the weather", None), ("Please set a timer", None), ("Right.", None),
])
def test_a_clear_yes_is_needed_and_a_no_word_wins(said, meaning):
    question = Confirmation("notes__delete_note", "notes", "delete_note",
                            {"name": "notes.txt"}).question
    assert heard_answer(said, question) is meaning
