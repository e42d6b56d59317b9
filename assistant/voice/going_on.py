"""A turn the user goes on with after it ended: when that can be, and what must wait for it.

A pause that sounded final may not be ("And so, my fellow Americans… ask not"). Speech
that starts in the reply's first moments continues the turn: before the reply has played
anything, or within its first sentence and at least `FIRST_MOMENTS_S` of its audio. The
reply is then taken back, so nothing it did may last: a tool that changes something (a
timer) waits until the turn can no longer be continued.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from assistant.tools import Tool, ToolOutput, ToolRefused, ToolRun
from assistant.voice.speech_out import SpokenReply
from assistant.voice.turns import FIRST_MOMENTS_S, TurnRecord, TurnSource

SETTLE_POLL_S = 0.02


def in_first_moments(record: TurnRecord, speech: SpokenReply | None, now: float) -> bool:
    """Whether speech starting at `now` continues `record`'s turn; `speech` is its reply if
    it is being spoken (None: still waiting, being transcribed, or not yet current)."""
    if record.continued or record.spoken or record.changed or record.finished.is_set():
        return False
    if speech is None or speech.first_audio_at is None:
        return True
    sentences = speech.sentences
    moments = max(FIRST_MOMENTS_S, sentences[0].seconds if sentences else 0.0)
    return now - speech.first_audio_at < moments


def going_on(record: TurnRecord) -> None:
    """The user went on with `record`'s turn (under the reply worker's lock): it continues
    in the next record, and what its reply did at once (a timer it started) is undone."""
    record.continued = True
    for undo in record.undo:
        undo()


def unheard(record: TurnRecord, now: float) -> bool:
    """Whether `record`'s reply must wait to start, where the microphone may not hear the
    user while Parley speaks (speakers, or not known yet): they may still go on with their
    turn until `FIRST_MOMENTS_S` after their speech ended, and if Parley cannot hear them
    it must not be speaking. Typed turns and timers do not wait."""
    if record.source is not TurnSource.AUDIO:
        return False
    speech_ended = record.started - (record.timings.end_of_speech_ms or 0) / 1000
    return now < speech_ended + FIRST_MOMENTS_S


def once_settled(record: TurnRecord, tool: Tool, run: ToolRun, lock: threading.RLock,
                 clock: Callable[[], float], closing: Callable[[], bool]) -> ToolRun:
    """`tool`'s `run` (behind its question, if it asks first), once `record`'s turn can no
    longer be continued (`FIRST_MOMENTS_S` after the user's speech ended); refused if they
    went on meanwhile. Once it ran, the turn stays as it is. A call that can be undone
    (`Tool.take_back`: a timer started) runs at once instead, and is undone if the turn is
    taken back."""

    def settled(arguments: dict) -> ToolOutput | str:
        undo = tool.take_back(arguments) if tool.take_back is not None else None
        if undo is not None:
            # Under the lock that taking the turn back holds: it is refused, or undone.
            with lock:
                if record.continued:
                    raise ToolRefused("the user went on talking")
                output = run(arguments)
                if isinstance(output, ToolOutput):
                    record.undo.append(lambda: undo(output))
                return output
        while not record.continued and not closing() and unheard(record, clock()):
            time.sleep(SETTLE_POLL_S)
        with lock:
            if not record.continued:
                record.changed = True
        if record.continued:
            raise ToolRefused("the user went on talking")
        return run(arguments)

    return settled
