"""Text chat end to end with a scripted model: piped stdin, exact transcript."""

import io

from rich.console import Console

from assistant.cli.chat import ChatSession
from assistant.cli.main import build_parser
from assistant.conversation import Conversation
from assistant.tools import builtin_tools
from tests.fakes import ScriptedChatModel


def run_chat(lines: str, *replies: str) -> tuple[str, Conversation]:
    model = ScriptedChatModel()
    model.enqueue(*replies)
    conversation = Conversation(model, builtin_tools())
    out = io.StringIO()
    session = ChatSession(conversation, interactive=False,
                          console=Console(file=out, highlight=False, markup=False, width=200))
    assert session.run(io.StringIO(lines)) == 0
    return out.getvalue(), conversation


def test_piped_chat_exact_transcript():
    transcript, _ = run_chat(
        "hello\n\nwhat is 6*7\n/history\n",
        "Hi, I am Parley.",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>',
        "6*7 is 42.")
    assert transcript == (
        "Hi, I am Parley.\n"
        "· Calculating 6*7…\n"
        "6*7 is 42.\n"
        "#1 user: hello\n"
        "#2 assistant: Hi, I am Parley.\n"
        "#3 user: what is 6*7\n"
        "#4 tool (calculator): 6*7 = 42\n"
        "#5 assistant: 6*7 is 42.\n")


def test_quit_clear_and_unknown_commands():
    transcript, conversation = run_chat("hi\n/clear\n/bogus\n/quit\nnever sent\n", "Hello.")
    assert "· Conversation cleared." in transcript
    assert "Unknown command /bogus" in transcript
    assert len(conversation.history) == 0


def test_flags_after_subcommand_do_not_reset_earlier_ones():
    args = build_parser().parse_args(["--ctx", "2048", "chat", "--max-tool-calls", "2"])
    assert (args.ctx, args.max_tool_calls) == (2048, 2)


def test_bad_config_is_a_clear_exit_2(tmp_path, capsys):
    from assistant.cli.main import main

    config = tmp_path / "parley.toml"
    config.write_text("colour = 'blue'\n")
    assert main(["--config", str(config)]) == 2
    assert "unknown setting(s) colour" in capsys.readouterr().err
