"""`parley replay`: a recorded session through the voice path, headless, as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from assistant.cli.engines import (
    build_segmenter,
    conversation_tools,
    load_voice_engines,
    microphone_input,
    voice_settings,
    wake_word_detector,
)
from assistant.cli.tools import running_mcp


def run_replay(args: argparse.Namespace) -> int:
    from assistant.timers import Timers
    from assistant.voice.loop import VoiceLoop
    from assistant.voice.replay import (
        SessionAnswers,
        SkippableClock,
        load_session,
        replay,
        session_json,
    )
    from audio.echo import FarEnd, RoomEcho
    from audio.memory_out import MemorySpeaker

    # A bad session, setting or model raises one of USER_ERRORS: main() shows it in a line.
    turns = load_session(args.session)
    far_end = FarEnd()
    room = RoomEcho(args.echo) if args.echo is not None else None
    microphone = microphone_input(args, far_end, lambda line: print(f"parley: {line}",
                                                                   file=sys.stderr), room)
    echo_cancelled = microphone is not None and microphone.canceller is not None
    wake_word = wake_word_detector(args, echo_cancelled)
    segmenter = build_segmenter(args, echo_cancelled,
                                lambda line: print(f"parley: {line}", file=sys.stderr))
    # Nobody is there to say "stop": a timer going off is announced once. Fed as fast as
    # it goes, nobody watches the words come either: no live passes (which would vary
    # with the machine's speed from run to run).
    settings = voice_settings(args, echo_cancelled=echo_cancelled)
    fed_fast = args.fast and microphone is None
    settings = replace(settings, ring_times=1,
                       live_transcript_s=0 if fed_fast else settings.live_transcript_s)
    clock = SkippableClock()
    rings: list = []  # the loop, once it exists, announces a timer going off
    timers = Timers(clock, on_finished=lambda timer: rings and rings[0].ring(timer))
    tools = conversation_tools(timers)
    with running_mcp(args, tools, lambda line: print(f"parley: {line}", file=sys.stderr)
                     ) as mcp:
        conversation, stt, tts = load_voice_engines(args, timers, tools=tools)
        if mcp is not None:
            # Every turn is offered the same tools on every run: replay waits for them.
            mcp.wait_started()
        barge_in_turns = any(t.during_reply_ms is not None for t in turns)
        # A barge-in needs a reply that is still playing, and an echo a room that plays in
        # real time, so those sessions play in real time.
        realtime = not args.fast or barge_in_turns or microphone is not None
        speaker = MemorySpeaker(realtime=realtime, keep_chunks=False,
                                far_end=far_end if microphone is not None else None)
        loop = VoiceLoop(conversation, stt, tts, speaker, segmenter, settings, clock=clock,
                         keep_audio=args.audio_out is not None, wake_word=wake_word)
        rings.append(loop)
        answers = SessionAnswers(loop.records)  # a change only where the file says yes
        if mcp is not None:  # asked as live, answered from the session file
            loop.spoken_confirmation.answered_by = answers
            mcp.confirm = loop.spoken_confirmation

        def skip(seconds: float) -> None:
            clock.skip(seconds)
            timers.run_due()

        try:
            produced = replay(loop, turns, fast=args.fast, skip=skip, microphone=microphone,
                              answers=answers)
        finally:
            timers.close()
            loop.close()
    document = session_json(loop, turns, produced)
    text = json.dumps(document, ensure_ascii=False, indent=2)
    try:
        if args.out is not None:
            args.out.write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        if args.audio_out is not None:
            write_spoken_audio(args.audio_out, produced, tts.sample_rate)
    except OSError as exc:
        print(f"parley: cannot write the replay's output ({exc}); check the path.",
              file=sys.stderr)
        return 2
    return 0


def write_spoken_audio(folder: Path, produced, sample_rate: int) -> None:
    import numpy as np

    from audio.files import write_wav

    folder.mkdir(parents=True, exist_ok=True)
    for number, records in enumerate(produced, start=1):
        chunks = [chunk for record in records for chunk in record.audio]
        if chunks:
            write_wav(folder / f"turn-{number:03d}.wav", np.concatenate(chunks), sample_rate)
