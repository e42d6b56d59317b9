"""Showing a reply's events on the terminal: text chat's renderer and voice's screen."""

from __future__ import annotations

from rich.console import Console

from assistant.events import (
    ConfirmationAnswered,
    ConfirmationAsked,
    Error,
    Event,
    Heard,
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


class VoiceScreen(ChatRenderer):
    """What the voice user sees: what was heard, the reply as it is spoken, the steps."""

    def render(self, event: Event) -> None:
        out = self.console
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
