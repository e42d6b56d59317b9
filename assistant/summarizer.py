"""Writing the running summary with the chat model, bounded in time and output.

`summarize` decides whether the conversation needs a new summary and writes it, with its
events; a reply does it for its own message (piped chat), or the idle time between turns
does it ahead of the coming ones (`ahead`), so no reply waits for it. `Summarizer` does
either for a conversation, keeping the result in its state (`ConversationState`).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace

from assistant.events import (
    Event,
    Summarized,
    SummaryCancelled,
    SummaryFailed,
    SummaryStarted,
)
from assistant.prompt import NEXT_MESSAGE_TOKENS, PromptBuilder
from memory.conversation_state import ConversationState
from memory.history import Message, group_exchanges
from memory.summary import (
    RETRY_AFTER_MESSAGES,
    SUMMARY_OUTPUT_TOKENS,
    RunningSummary,
    SummaryPlan,
    accept_bullets,
    append_bullets,
    is_text,
    plan_summary,
    summary_request,
)
from models.base import CancelToken, ChatModel, PromptMessage, TextChunk, ToolSpec, UsageChunk
from models.errors import EngineError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SummaryOutcome:
    summary: RunningSummary | None
    """The new summary, or None when it could not be written."""
    new_bullets: tuple[str, ...] = ()
    replaced: int = 0
    failure: str = ""
    """Why it was not written: shown to the user, the reply goes on without it."""
    cancelled: bool = False
    output_tokens: int = 0
    raw_output: str = ""
    """What the model wrote, before validation (for the benchmark)."""


class _Either(CancelToken):
    """Cancelled by its own `cancel()` (the deadline) or with `outer` (the user): the model
    then stops even while it reads the request, between two batches of it."""

    def __init__(self, outer: CancelToken) -> None:
        super().__init__()
        self._outer = outer

    @property
    def cancelled(self) -> bool:
        return super().cancelled or self._outer.cancelled


def write_summary(
    model: ChatModel,
    plan: SummaryPlan,
    summary: RunningSummary,
    cancel: CancelToken,
    seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> SummaryOutcome:
    """Ask the model for one bullet per newly covered exchange and append the valid ones.

    The deadline includes the wait for the model; a timed-out summary's partial output
    is discarded, so the previous summary stays as it was.
    """
    deadline = clock() + seconds
    room = model.context_size - SUMMARY_OUTPUT_TOKENS - model.overhead_tokens([])
    request = summary_request(
        plan, summary, lambda text: model.count_tokens(PromptMessage("user", text)), room)
    if request is None:
        return SummaryOutcome(None, failure="the earlier conversation is too long to summarize")
    system, user = request
    prompt = [PromptMessage("system", system), PromptMessage("user", user)]
    inner = _Either(cancel)  # stops the model at the deadline without cancelling the reply
    output, tokens = "", 0
    try:
        for chunk in model.stream(prompt, [], SUMMARY_OUTPUT_TOKENS, inner):
            if cancel.cancelled:
                inner.cancel()
                return SummaryOutcome(None, cancelled=True)
            if clock() > deadline:
                inner.cancel()
                return SummaryOutcome(None, failure=f"it took longer than {seconds:.0f} s")
            if isinstance(chunk, TextChunk):
                output += chunk.text
            elif isinstance(chunk, UsageChunk):
                tokens = chunk.completion_tokens
    except EngineError as exc:  # the reply goes on without a summary
        log.debug("the summary's model call failed", exc_info=True)
        return SummaryOutcome(None, failure=f"the model failed ({exc})")
    except Exception as exc:  # a bug, but the reply must still go on without a summary
        log.exception("writing the summary failed")
        return SummaryOutcome(None, failure=f"it failed ({type(exc).__name__}: {exc})")
    if cancel.cancelled:
        return SummaryOutcome(None, cancelled=True)
    if clock() > deadline:
        return SummaryOutcome(None, failure=f"it took longer than {seconds:.0f} s")
    bullets, replaced = accept_bullets(output, plan, summary.bullets)
    new = append_bullets(summary, bullets, plan.last_seq, replaced)
    return SummaryOutcome(new, tuple(bullets), replaced, output_tokens=tokens, raw_output=output)


AHEAD_EXCHANGES = 4
"""A typical exchange, for the room summarizing ahead keeps: the median of the last few."""


def ahead_tokens(messages: Sequence[Message], summary: RunningSummary,
                 count: Callable[[Message], int]) -> int:
    """Tokens kept for the coming turns when the summary is written between turns: the next
    message and one typical exchange after it. The summary is then written one idle time
    before a reply would need it, so one the user cuts short gets a second chance."""
    recent = group_exchanges(m for m in messages if m.seq > summary.covered_through)
    sizes = [sum(count(m) for m in exchange.messages if is_text(m))
             for exchange in recent[-AHEAD_EXCHANGES:]]
    return NEXT_MESSAGE_TOKENS + (round(statistics.median(sizes)) if sizes else 0)


def summarize(
    model: ChatModel,
    prompts: PromptBuilder,
    messages: tuple[Message, ...],
    summary: RunningSummary,
    current_seq: int,
    specs: Sequence[ToolSpec],
    emit: Callable[[Event], None],
    cancel: CancelToken,
    seconds: float,
    clock: Callable[[], float] = time.monotonic,
    ahead: int = 0,
    keep_prompt: bool = False,
) -> RunningSummary | None:
    """The summary to go on with: a new one covering the oldest exchanges when the text no
    longer fits beside the summary (with `ahead` tokens of turns to come), else `summary`.

    A failure keeps `summary`, with a new attempt after six more messages (the core drops
    the oldest messages meanwhile). None when cancelled: nothing of it is kept.
    `keep_prompt`: the model writes it aside (`ChatModel.aside`, where it can), so the
    prompt it had read for the next reply is still there, even if the summary is cut short.
    """
    if current_seq < summary.retry_at:
        return summary
    bare = prompts.system_message(specs, RunningSummary(), messages)
    room = prompts.room(bare, specs)
    summary_tokens = (model.count_tokens(prompts.system_message(specs, summary, messages))
                      - model.count_tokens(bare))
    plan = plan_summary(messages, summary, current_seq, prompts.count, room, summary_tokens,
                        ahead=ahead)
    if plan is None:
        return summary
    emit(SummaryStarted())
    started = clock()
    keep = keep_prompt and model.capabilities.keeps_prompt_aside
    with model.aside() if keep else nullcontext():
        outcome = write_summary(model, plan, summary, cancel, seconds, clock)
    log.debug("summary of messages up to #%d: %.0f ms, %s", plan.last_seq,
              (clock() - started) * 1000,
              "cancelled" if outcome.cancelled else outcome.failure or "written")
    if outcome.cancelled:
        emit(SummaryCancelled())
        return None
    if outcome.summary is None:
        retry_at = current_seq + RETRY_AFTER_MESSAGES
        emit(SummaryFailed(outcome.failure, retry_at))
        return replace(summary, retry_at=retry_at)
    emit(Summarized(outcome.summary.text, outcome.summary.covered_through,
                    outcome.new_bullets, outcome.replaced))
    return outcome.summary


class Summarizer:
    """Keeps a conversation's running summary (`state`), written with `model`: inside a
    reply (`before_reply`, piped chat) or between turns (`ahead`)."""

    def __init__(self, model: ChatModel, state: ConversationState, prompts: PromptBuilder,
                 seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.state = state
        self.prompts = prompts
        """The conversation's prompt builder, the summary's room is measured with."""
        self.seconds = seconds
        """Limit for writing one summary, including the wait for the model."""
        self.clock = clock

    def before_reply(self, current_seq: int, specs: Sequence[ToolSpec],
                     emit: Callable[[Event], None], cancel: CancelToken) -> bool:
        """Cover the oldest exchanges when the text no longer fits beside the reply's
        message `current_seq` and tools `specs`; False if cancelled.

        At most once per reply, before any tool call, outside the research budget. A
        failure falls back to the core's dropping and waits six messages to try again.
        """
        state = self.state
        summary = summarize(self.model, self.prompts, state.history.messages, state.summary,
                            current_seq, specs, emit, cancel, self.seconds, self.clock)
        if summary is None:
            return False
        state.set_summary(summary)
        return True

    def ahead(self, specs: Sequence[ToolSpec], emit: Callable[[Event], None],
              cancel: CancelToken) -> bool:
        """Between turns: write the summary the coming turns (offered `specs`) will need,
        before a reply does.

        It plans as if the next message and a typical exchange after it had come
        (`ahead_tokens`), emitting the summary's events. Cancelled (the user spoke or
        typed), the summary stays as it was, to be tried again at the next idle time, and
        the prompt prepared before it is still there for the reply (`ChatModel.aside`).
        Returns False when cancelled.
        """
        state = self.state
        messages = state.history.messages
        prompts = self.prompts
        # Kept aside: a summary cut short must not cost the reply that stopped it its prompt.
        summary = summarize(self.model, prompts, messages, state.summary,
                            state.history.next_seq, specs, emit, cancel, self.seconds,
                            self.clock, ahead=ahead_tokens(messages, state.summary,
                                                           prompts.count),
                            keep_prompt=True)
        if summary is None:
            return False
        if state.history.messages[:len(messages)] == messages:  # not cleared meanwhile
            state.set_summary(summary)
        return True
