"""Writing the running summary with the chat model, bounded in time and output."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from memory.summary import (
    SUMMARY_OUTPUT_TOKENS,
    RunningSummary,
    SummaryPlan,
    accept_bullets,
    append_bullets,
    summary_request,
)
from models.base import CancelToken, ChatModel, PromptMessage, TextChunk, UsageChunk
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
    inner = CancelToken()  # stops the model at the deadline without cancelling the reply
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
