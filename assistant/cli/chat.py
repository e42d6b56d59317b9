"""Text chat: renders a reply's events on the terminal; commands start with /."""

from __future__ import annotations

import threading
from functools import partial
from typing import TextIO

from rich.console import Console

from assistant.conversation import Conversation
from assistant.events import (
    Error,
    Event,
    ReplyDone,
    Status,
    Summarized,
    TextDelta,
    ToolCall,
    ToolResult,
)
from memory.summary import summary_block
from models.base import CancelToken


class ChatSession:
    def __init__(self, conversation: Conversation, interactive: bool,
                 console: Console | None = None) -> None:
        self.conversation = conversation
        self.interactive = interactive
        self._prepared: threading.Event | None = None
        # Piped output stays plain text, so transcripts compare exactly.
        self.console = console or Console(highlight=False, markup=False,
                                          force_terminal=interactive or None)

    def render(self, event: Event) -> None:
        out = self.console
        if isinstance(event, TextDelta):
            out.print(event.text, end="", soft_wrap=True)
        elif isinstance(event, (Status, ToolCall)):
            text = event.text if isinstance(event, Status) else event.label
            out.print(f"· {text}…" if not text.endswith("…") else f"· {text}", style="dim")
        elif isinstance(event, Summarized):
            new = len(event.new_bullets)
            out.print(f"· Summarized the earlier conversation up to #{event.covered_through} "
                      f"({new} new bullet{'s' if new != 1 else ''}; /summary shows it)",
                      style="dim")
        elif isinstance(event, ToolResult) and event.is_error:
            out.print(f"· {event.name}: {event.content}", style="dim")
        elif isinstance(event, ReplyDone):
            out.print(" [stopped]" if event.cancelled else "", style="dim")
        elif isinstance(event, Error):
            out.print(f"! {event.message}", style="bold red")

    def command(self, line: str) -> bool:
        """Handle a /command; returns False when the chat should end."""
        name = line.split()[0].lower()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            from assistant.cli.main import HELP_TEXT
            self.console.print(HELP_TEXT)
        elif name == "/history":
            for m in self.conversation.history.messages:
                who = f"{m.role} ({m.tool})" if m.tool else m.role
                text = m.content if len(m.content) <= 200 else m.content[:200] + "…"
                self.console.print(f"#{m.seq} {who}: {text}")
        elif name == "/summary":
            self.show_summary()
        elif name == "/clear":
            self.conversation.clear()
            self.console.print("· Conversation cleared.", style="dim")
        else:
            self.console.print(f"! Unknown command {name}; /help lists them.", style="bold red")
        return True

    def show_summary(self) -> None:
        conversation = self.conversation
        if not conversation.summary.covered_through:
            self.console.print("· No summary yet: the whole conversation still fits the "
                               "model's context.", style="dim")
            return
        self.console.print(summary_block(conversation.summary, conversation.history.messages,
                                         with_lookup=False))

    def run(self, stdin: TextIO) -> int:
        from assistant.cli.main import run_in_worker

        if self.interactive:
            self.console.print("Parley: type a message, /help for commands, Ctrl-D to quit.",
                               style="dim")
        while True:
            try:
                line = self.console.input("[bold]you> [/bold]" if self.interactive else "") \
                    if self.interactive else stdin.readline()
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
            cancel = CancelToken()
            self._wait_prepared()
            run_in_worker(partial(self.conversation.reply, line, self.render, cancel), cancel)
            self._prepare_next()
        # Leaving while llama.cpp still runs on a daemon thread can crash the interpreter.
        self._wait_prepared()
        return 0

    def _prepare_next(self) -> None:
        """While the user types, process the next prompt's beginning (the model is idle)."""
        done = threading.Event()

        def prepare() -> None:
            try:
                self.conversation.prepare_next()
            finally:
                done.set()

        threading.Thread(target=prepare, name="prepare", daemon=True).start()
        self._prepared = done

    def _wait_prepared(self) -> None:
        # One model, one user at a time: the reply waits for the preparation to finish.
        # An Event, not Thread.join, so Ctrl-C cannot confuse it (see run_in_worker).
        if self._prepared is not None:
            self._prepared.wait()
