"""Text chat: a line typed (or piped) is a message; commands start with /."""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING, TextIO

from rich.console import Console

from assistant.between_turns import BetweenTurns
from assistant.cli.render import ChatRenderer
from assistant.cli.terminal import read_line
from assistant.cli.tools import describe_servers, tool_lines
from assistant.confirmation import Answer, Confirmation, answer_for, outcome_of
from assistant.conversation import Conversation
from assistant.events import Event, Summarized, SummaryFailed
from assistant.timers import Timer, Timers, cancelled_line, finished_event
from assistant.workers import run_interruptibly
from memory.history import said_at
from memory.summary import summary_block
from models.base import CancelToken

if TYPE_CHECKING:
    from assistant.mcp_client.tools import McpTools

HELP_TEXT = """Commands:
  /help      this help
  /history   the numbered messages of this conversation, with when each was said
  /summary   the summary of earlier messages that no longer fit, and what it covers
  /clear     forget the conversation and start again (with --save or --resume, in its
             file too)
  /tools     the tools the model can use, and the MCP servers' state (one that failed
             is started again)
  /quit      end (or Ctrl-D); Ctrl-C stops a reply but keeps the conversation"""


class ChatSession:
    def __init__(self, conversation: Conversation, interactive: bool,
                 console: Console | None = None, timers: Timers | None = None,
                 mcp: McpTools | None = None, stdin: TextIO | None = None) -> None:
        self.conversation = conversation
        self.timers = timers
        self.interactive = interactive
        self.mcp = mcp
        """The MCP servers, for /tools (None: none configured)."""
        self.stdin = stdin
        """Where piped messages come from: a confirmation's answer is the next line."""
        self._cancel: CancelToken | None = None
        # Piped lines are there at once (or the input has ended): a prompt read ahead
        # would be read again by the reply, or, after the last line, only waited for.
        self._between_turns = BetweenTurns(conversation, prepare=interactive)
        """The work done while the user types: the summary (if the conversation was built
        to write it between turns: at a terminal), then the next prompt's beginning."""
        self._idle_outcomes: list[Event] = []
        # Piped output stays plain text, so transcripts compare exactly.
        self.console = console or Console(highlight=False, markup=False,
                                          force_terminal=interactive or None)
        self.render = ChatRenderer(self.console).render

    def command(self, line: str) -> bool:
        """Handle a /command; returns False when the chat should end."""
        name = line.split()[0].lower()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.console.print(HELP_TEXT)
        elif name == "/history":
            for m in self.conversation.history.messages:
                who = f"{m.role} ({m.tool})" if m.tool else m.role
                when = f", {said_at(m)}" if m.at else ""
                text = m.content if len(m.content) <= 200 else m.content[:200] + "…"
                self.console.print(f"#{m.seq} {who}{when}: {text}", soft_wrap=True)
        elif name == "/tools":
            self.show_tools()
        elif name == "/summary":
            self.show_summary()
        elif name == "/clear":
            self._stop_idle()  # a summary of the old conversation must not land in the new
            self.conversation.clear()
            self.console.print("· Conversation cleared.", style="dim")
        else:
            self.console.print(f"! Unknown command {name}; /help lists them.", style="bold red")
        return True

    def show_tools(self) -> None:
        """Every tool the model can use; servers that failed are started again (only when
        asked: a server that keeps failing is never restarted in a loop)."""
        for line in tool_lines(self.conversation.tools):
            self.console.print(f"· {line}", style="dim", soft_wrap=True)
        if self.mcp is None:
            return
        for line in describe_servers(self.mcp):
            self.console.print(f"· {line}", style="dim", soft_wrap=True)
        restarted = self.mcp.restart_failed()
        if restarted:
            self.console.print(f"· Starting {', '.join(restarted)} again.", style="dim")

    def confirm(self, confirmation: Confirmation) -> Answer:
        """A typed yes before a tool changes something (on the reply's thread, while the
        main one waits for it); Ctrl-C, the end of input or anything but a yes is a no, and
        the model reads what was typed (the user may have asked for something else)."""
        self.console.print(f"? {confirmation.question_in_full} (yes/no) ", style="bold",
                           end="")
        cancel = self._cancel
        try:
            if self.interactive:
                line = read_line(self.console, stop=(lambda: cancel.cancelled) if cancel else None)
            else:
                line = (self.stdin or sys.stdin).readline()
                self.console.print(line.rstrip("\n"))  # the transcript shows the answer
        except (EOFError, KeyboardInterrupt):
            line = ""
        line = (line or "").strip()
        if not line and cancel is not None and cancel.cancelled:
            return answer_for("stopped")
        return answer_for(outcome_of(line, confirmation.question), line)

    def timer_finished(self, timer: Timer) -> None:
        """On the timers' thread, even while the user types: a line and the terminal bell."""
        self.render(finished_event(timer))

    def end_timers(self) -> None:
        """Ending Parley ends its timers: say which ones were still running."""
        if self.timers is None:
            return
        left = self.timers.close()
        if left:
            self.console.print(f"· {cancelled_line(left, self.timers.clock())}", style="dim")

    def show_summary(self) -> None:
        conversation = self.conversation
        if not conversation.summary.covered_through:
            self.console.print("· No summary yet: the whole conversation still fits the "
                               "model's context.", style="dim")
            return
        self.console.print(summary_block(conversation.summary, conversation.history.messages,
                                         with_lookup=False))

    def run(self, stdin: TextIO) -> int:
        if self.interactive:
            self.console.print("Parley: type a message, /help for commands, Ctrl-D to quit.",
                               style="dim")
        while True:
            try:
                line = read_line(self.console, "you> ", "bold") if self.interactive \
                    else stdin.readline()
            except (EOFError, KeyboardInterrupt):
                break
            if not self.interactive and line == "":
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    break
                continue
            cancel = self._cancel = CancelToken()
            self._stop_idle()
            for event in self._idle_outcomes:  # written while the user typed: said now
                self.render(event)
            self._idle_outcomes.clear()
            run_interruptibly(partial(self.conversation.reply, line, self.render, cancel,
                                      approve=self.confirm),
                              cancel.cancel)
            self._start_idle()
        # Leaving while llama.cpp still runs on a daemon thread can crash the interpreter.
        self._between_turns.close()
        self._between_turns.wait()
        self.end_timers()
        return 0

    def _start_idle(self) -> None:
        """While the user types (the model is idle): the work between turns. Its outcome
        is shown with the next reply: printed now, it would land in the middle of the line
        being typed."""
        self._between_turns.start(self._keep_outcome)

    def _keep_outcome(self, event: Event) -> None:
        if isinstance(event, (Summarized, SummaryFailed)):
            self._idle_outcomes.append(event)

    def _stop_idle(self) -> None:
        """One model, one user at a time: before a reply, stop the summary being written
        between turns (the reply goes on with the last one; the next idle time tries again)
        and wait for the model's current step, or for the prompt being prepared, which the
        reply would read anyway. Piped input does no work between lines."""
        self._between_turns.finish(stop=self.interactive)
