"""`parley web` against `parley voice`: end of speech to first audio, and memory.

    python -m benchmarks.web [--only latency|memory] [--turns 6] [--rounds 4] [--socket]

`latency`: the same recordings of human speech (benchmarks.voice's six turns), each said
in turn, alternately, to each path in one run: `parley voice`'s (the session built as
Parley builds it, in this process, fed 30 ms microphone blocks at real-time pace, as
benchmarks.voice measures it); the page's (a real `parley web` process and a real
Chromium tab whose fake microphone plays the recording, through the page's AudioWorklet
and WebSocket); with `--socket`, a WebSocket client sending the page's 30 ms frames at
real-time pace (the server's share alone, without the browser). Each path has its own
Parley, as each user has: webrtcvad adapts to the audio it has heard (after the browser's
noise-suppressed audio it ended the same recordings up to 210 ms later;
benchmarks/README.md). End of speech is the same instant in every path: the recording's
last loud 10 ms, on the clock of the audio as it was delivered (the earliest any block
arrived after its last sample was due). First audio: the speaker asked to play the
reply's first chunk (voice), the first audio frame received by the page or the client.
`memory`: `parley voice` (on a PulseAudio sound server with a virtual microphone) and
`parley web` with one connected tab, as processes on the embedded models, after one
spoken turn: peak and current resident memory and PSS, side by side.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.voice import ANSWER_TOKENS, load_engines, p90, replay_session, replay_settings
from benchmarks.web_paths import (
    FLAGS,
    SETTLE_S,
    TURN_S,
    Clip,
    TimedSpeaker,
    WebProcess,
    clips,
    page_browser,
    page_turn,
    socket_turn,
    voice_turn,
)
from tests.support import speech_samples as samples
from tests.support.serving import START_S, Lines, environment, parley

GOAL_MS = 50.0
"""The page may add at most this at the median."""


@dataclass
class Route:
    """One way to Parley, and its latencies in ms (NaN: no audio came)."""

    label: str
    latencies: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- side by side --------------------------------------------------------------------------

def bench_latency(turns: int, rounds: int, with_socket: bool) -> None:
    from playwright.sync_api import sync_playwright

    recordings = clips(turns)
    paths = [Route("parley voice"), Route("parley web, Chromium page")]
    if with_socket:
        paths.append(Route("parley web, WebSocket client"))
    print(f"\nEnd of speech to first audio: {len(recordings)} recordings x {rounds} rounds, "
          f"each said to {' / '.join(p.label for p in paths)} in turn (answers up to "
          f"{ANSWER_TOKENS} tokens, the fixed end-of-speech wait)")
    print(f"  {'round recording':26s} " + " ".join(f"{p.label:>27s}" for p in paths))
    engines = load_engines()
    speaker = TimedSpeaker()
    web = WebProcess(*FLAGS)
    client = WebProcess(*FLAGS) if with_socket else None
    time.sleep(SETTLE_S)
    try:
        with replay_session(engines, replay_settings(local_intents=False),
                            speaker=speaker) as built, sync_playwright() as playwright, \
                tempfile.TemporaryDirectory() as folder:
            built.loop.wait_idle(TURN_S)  # the system prompt read ahead, as Parley does
            wav = Path(folder) / "microphone.wav"
            browser = page_browser(playwright, wav)
            for number in range(rounds):
                for clip in recordings:
                    voiced, own = voice_turn(built.loop, speaker, clip)
                    row = [voiced]
                    ms, note = page_turn(browser, web, clip, wav)
                    row.append(ms)
                    paths[1].notes += [note] if note else []
                    time.sleep(SETTLE_S)
                    if with_socket:
                        row.append(socket_turn(client, clip))
                        time.sleep(SETTLE_S)
                    for path, value in zip(paths, row, strict=True):
                        path.latencies.append(value)
                    print(f"  {number + 1:<5d} {clip.name[-20:]:20s} "
                          + " ".join(f"{v:24.0f} ms" for v in row)
                          + f"   (voice loop's own: {own:.0f} ms)", flush=True)
    finally:
        web.stop()
        if client is not None:
            client.stop()
    report(paths)


def report(paths: list[Route]) -> None:
    """Medians, and each web path against voice: the difference of the medians, and the
    median of the differences on the same recording and round."""
    voice = paths[0]
    for path in paths:
        values = [v for v in path.latencies if v == v]  # NaN: no audio came
        if not values:
            print(f"  {path.label:28s} no reply was heard")
            continue
        print(f"  {path.label:28s} median {statistics.median(values):5.0f} ms, p90 "
              f"{p90(values):5.0f}, min {min(values):5.0f}, max {max(values):5.0f}"
              + (f"; {len(path.latencies) - len(values)} without audio"
                 if len(values) < len(path.latencies) else ""))
        for note in path.notes:
            print(f"    {note}")
    base = statistics.median(v for v in voice.latencies if v == v)
    for path in paths[1:]:
        pairs = [w - v for w, v in zip(path.latencies, voice.latencies, strict=True)
                 if w == w and v == v]
        if pairs:
            added = statistics.median(v for v in path.latencies if v == v) - base
            print(f"  {path.label} - parley voice: {added:+.0f} ms between the medians, "
                  f"{statistics.median(pairs):+.0f} ms the median of the {len(pairs)} "
                  f"differences (goal: at most +{GOAL_MS:.0f} ms)")


# -- memory --------------------------------------------------------------------------------

def memory_of(pid: int) -> dict[str, float]:
    """Peak and current resident memory, and the proportional set size, in MB."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    rollup = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text()
                  .splitlines()[1:])
    kb = {"peak": status["VmHWM"], "resident": status["VmRSS"], "pss": rollup["Pss"]}
    return {name: int(value.split()[0]) / 1024 for name, value in kb.items()}


def voice_memory(clip: Clip) -> dict[str, float]:
    """`parley voice` on a virtual microphone that says `clip`, after its spoken reply."""
    import re
    import subprocess

    from tests.support.sound_server import running_sound_server

    with running_sound_server() as sound:
        process = subprocess.Popen(parley("voice", *FLAGS), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=environment(TERM="dumb", **sound.env))
        assert process.stdout is not None and process.stderr is not None
        out, err = Lines(process.stdout), Lines(process.stderr)
        try:
            if out.wait_for(re.compile(r"[Ll]istening"), START_S) is None:
                raise SystemExit(f"parley voice did not start listening:\n{out.text(1)}\n"
                                 f"{err.text(1)}")
            time.sleep(2)  # the system prompt read ahead, as before anyone speaks
            sound.feed(clip.pcm)
            sound.wait_fed(TURN_S)
            settled = quiet_output(out, TURN_S)
            figures = memory_of(process.pid)
        finally:
            process.terminate()
            process.wait(60)
        if not settled:
            print("  warning: parley voice was still writing after "
                  f"{TURN_S:.0f} s:\n{out.text(1)}")
        return figures


def quiet_output(lines: Lines, timeout: float, quiet_s: float = 5.0) -> bool:
    """Wait until `lines` has not grown for `quiet_s` (the reply said and spoken)."""
    deadline, count, since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        if len(lines.lines) != count:
            count, since = len(lines.lines), time.monotonic()
        elif time.monotonic() - since > quiet_s:
            return True
        time.sleep(0.2)
    return False


def web_memory(clip: Clip) -> dict[str, float]:
    """`parley web` with one tab (a WebSocket client) that says `clip`, after the reply."""
    web = WebProcess(*FLAGS)
    try:
        time.sleep(2)
        socket_turn(web, clip, stop=False)
        time.sleep(SETTLE_S)  # the next prompt prepared, as voice had
        return memory_of(web.process.pid)
    finally:
        web.stop()


def bench_memory() -> None:
    clip = clips(1)[0]
    print(f"\nMemory after one spoken turn ({clip.name}), embedded models, "
          f"{' '.join(FLAGS)}, each its own process")
    voice, web = voice_memory(clip), web_memory(clip)
    print(f"  {'':28s} {'peak RSS':>9s} {'RSS':>9s} {'PSS':>9s}")
    for label, figures in (("parley voice", voice), ("parley web, one tab", web)):
        print(f"  {label:28s} " + " ".join(f"{figures[k]:6.0f} MB" for k in
                                          ("peak", "resident", "pss")))
    print("  web / voice: " + ", ".join(f"{k} {web[k] / voice[k]:.2f}x"
                                         for k in ("peak", "resident", "pss")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["latency", "memory"])
    parser.add_argument("--turns", type=int, default=6, help="recordings (default 6)")
    parser.add_argument("--rounds", type=int, default=4,
                        help="times each recording is said to each path (default 4)")
    parser.add_argument("--socket", action="store_true",
                        help="also a WebSocket client sending the page's frames (the server's "
                             "share without the browser)")
    args = parser.parse_args(argv)
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    if args.only in (None, "latency"):
        bench_latency(args.turns, args.rounds, args.socket)
    if args.only in (None, "memory"):
        bench_memory()


if __name__ == "__main__":
    main()
