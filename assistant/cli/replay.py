"""`parley replay`: a recorded session through the voice path, headless, as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from assistant.session.builder import voice_session
from assistant.session.settings import Settings
from assistant.voice.turns import VoiceSettings


def run_replay(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.voice.replay import (
        SessionAnswers,
        SkippableClock,
        load_session,
        replay,
        session_json,
    )
    from audio.echo import RoomEcho
    from audio.memory_out import MemorySpeaker

    # A bad session, setting or model raises one of USER_ERRORS: main() shows it in a line.
    turns = load_session(args.session)
    room = RoomEcho(args.echo) if args.echo is not None else None

    def adjust(voice: VoiceSettings, in_real_time: bool) -> VoiceSettings:
        # Nobody is there to say "stop": a timer going off is announced once. Fed as fast
        # as it goes, nobody watches the words come either: no live passes (which would
        # vary with the machine's speed from run to run).
        fed_fast = args.fast and not in_real_time
        return replace(voice, ring_times=1,
                       live_transcript_s=0 if fed_fast else voice.live_transcript_s)

    def output(far_end):
        # A barge-in needs a reply that is still playing, and an echo a room that plays in
        # real time, so those sessions play in real time.
        barge_in_turns = any(t.during_reply_ms is not None for t in turns)
        realtime = not args.fast or barge_in_turns or far_end is not None
        return MemorySpeaker(realtime=realtime, keep_chunks=False, far_end=far_end)

    clock = SkippableClock()
    answers = SessionAnswers()  # asked as live, answered from the session file
    with voice_session(settings, output, lambda line: print(f"parley: {line}",
                                                           file=sys.stderr),
                       clock=clock, room=room, keep_audio=args.audio_out is not None,
                       adjust=adjust, answered_by=answers) as session:
        loop, mcp = session.loop, session.mcp
        if mcp is not None:
            # Every turn is offered the same tools on every run: replay waits for them.
            mcp.wait_started()

        def skip(seconds: float) -> None:
            clock.skip(seconds)
            session.timers.run_due()

        produced = replay(loop, turns, fast=args.fast, skip=skip,
                          microphone=session.microphone, answers=answers)
    document = session_json(loop, turns, produced)
    text = json.dumps(document, ensure_ascii=False, indent=2)
    try:
        if args.out is not None:
            args.out.write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        if args.audio_out is not None:
            write_spoken_audio(args.audio_out, produced)
    except OSError as exc:
        print(f"parley: cannot write the replay's output ({exc}); check the path.",
              file=sys.stderr)
        return 2
    return 0


def write_spoken_audio(folder: Path, produced) -> None:
    from audio.files import write_wav
    from models.speech import SpokenAudio

    folder.mkdir(parents=True, exist_ok=True)
    for number, records in enumerate(produced, start=1):
        chunks = [chunk for record in records for chunk in record.audio]
        if chunks:
            turn = SpokenAudio.joined(chunks)
            write_wav(folder / f"turn-{number:03d}.wav", turn.pcm, turn.sample_rate)
