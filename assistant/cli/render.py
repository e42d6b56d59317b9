"""Showing a reply's events on the terminal: text chat's renderer and voice's screen."""

from __future__ import annotations

from rich.console import Console
from rich.control import Control, ControlType

from assistant.events import (
    ConfirmationAnswered,
    ConfirmationAsked,
    Error,
    Event,
    Heard,
    HeardPartial,
    Interrupted,
    RecallHint,
    ReplyDone,
    ResearchBudgetReached,
    Spoken,
    Status,
    Summarized,
    SummaryFailed,
    SummaryStarted,
    TextDelta,
    TimerFinished,
    ToolCall,
    ToolResult,
    TurnContinued,
    Wake,
)

_STEPS = (Status, SummaryStarted, SummaryFailed, RecallHint, ResearchBudgetReached)
"""Events shown as a dim step line, by their `text`."""


_ANSWERED = {"yes": "Yes: running it.", "no": "Not done.",
             "unclear": "Not done: that was not a yes.",
             "no-answer": "Not done: no answer came.", "stopped": "Not done."}
"""What the voice screen says after a question was answered, by its outcome."""


class ChatRenderer:
    """Text chat: the streamed answer, each step on a dim line, errors in red."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, event: Event) -> None:
        out = self.console
        if isinstance(event, TextDelta):
            out.print(event.text, end="", soft_wrap=True)
        elif isinstance(event, (*_STEPS, ToolCall)):
            text = event.label if isinstance(event, ToolCall) else event.text
            # A step still going gets "…"; one that is a finished sentence keeps its stop.
            out.print(f"· {text}" if text.endswith(("…", ".")) else f"· {text}…", style="dim")
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
        elif isinstance(event, TimerFinished):
            # The bell sounds in the terminal even while the user is typing a message.
            out.file.write("\a")
            out.print(f"\n⏰ {event.text}", style="bold")


_CLEAR_LINE = Control((ControlType.CARRIAGE_RETURN,), (ControlType.ERASE_IN_LINE, 2))


class VoiceScreen(ChatRenderer):
    """What the voice user sees: what was heard, the reply as it is spoken, the steps.

    On a terminal the user's words appear while they speak, on one line rewritten in
    place (`heard-partial`), which the final `you: …` line replaces. Elsewhere (a pipe, a
    log, TERM=dumb) only the final line is written."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self._live_line = False
        self._mid_reply = False
        """A reply's text was written and its line not ended: the user's words (if they
        speak over it) start a line of their own."""

    def render(self, event: Event) -> None:
        out = self.console
        if isinstance(event, HeardPartial):
            self._show_live(event)
            return
        if self._live_line:  # whatever comes next takes the line of the words so far
            out.control(_CLEAR_LINE)
            self._live_line = False
        if isinstance(event, TextDelta):
            self._mid_reply = True
        elif isinstance(event, ReplyDone):
            self._mid_reply = False
        if isinstance(event, Heard):
            if event.text:
                cut = " (cut at the maximum length; go on)" if event.cut else ""
                out.print(f"you: {event.text}{cut}", style="bold")
            elif event.rejected and event.rejected != "too quiet":
                out.print(f"· (heard no words: {event.rejected})", style="dim")
        elif isinstance(event, Interrupted):
            out.print(f"\n· Stopped after {event.spoken_seconds:.1f} s of speech.", style="dim")
        elif isinstance(event, TurnContinued):
            out.print("\n· You went on: listening to the rest.", style="dim")
        elif isinstance(event, Wake):
            out.print("· Listening…", style="dim")
        elif isinstance(event, ConfirmationAsked):
            out.print(f"? {event.question} (say or type yes or no)", style="bold")
        elif isinstance(event, ConfirmationAnswered):
            out.print(f"· {_ANSWERED.get(event.outcome, 'Not done.')}", style="dim")
        elif isinstance(event, ReplyDone):
            out.print("")
        elif not isinstance(event, Spoken):
            super().render(event)

    def _show_live(self, event: HeardPartial) -> None:
        out = self.console
        if not out.is_terminal or out.is_dumb_terminal:  # it cannot rewrite a line
            return
        words = f"{event.text} {event.tentative}".strip()
        room = max(10, out.width - len("you: …") - 1)  # one row: \r rewrites only that
        if len(words) > room:
            words = "…" + words[-room + 1:]
        if self._mid_reply:
            out.print("")
            self._mid_reply = False
        out.control(_CLEAR_LINE)
        out.print(f"you: {words}…", style="dim", end="", soft_wrap=True, highlight=False)
        self._live_line = True
