"""The paths a recording takes to Parley in `benchmarks.web`, each timed from the same
end of speech to the reply's first audio: `parley voice`'s voice loop in this process, the
page in a real Chromium tab of a `parley web` process, and a WebSocket client sending the
page's frames to it.

End of speech is the recording's last loud 10 ms, on the clock of the audio as it was
delivered: the earliest any block arrived after its last sample was due (a block is
delivered once its last sample is recorded; a late one is late for the path, not for the
speaker).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from audio.memory_out import MemorySpeaker
from benchmarks.voice import ANSWER_TOKENS
from tests.support import speech_samples as samples
from tests.support.clips import offset_in
from tests.support.serving import START_S, Lines, environment, parley

RATE = samples.SAMPLE_RATE
LEAD_S, TAIL_S = 0.5, 1.5
"""Silence before each recording (the microphone starting) and after it (the wait)."""
VOICE_BLOCK = RATE * 30 // 1000
"""`parley voice`'s microphone block (audio/capture.py)."""
PAGE_FRAME = 480
"""The page's worklet frame (mic-worklet.js): 30 ms."""
TURN_S = 90.0
"""A turn not answered and spoken by then failed."""
FLAGS = ["--answer-tokens", str(ANSWER_TOKENS), "--no-local-intents", "--end-of-turn",
         "silence"]
"""`parley web`'s flags for benchmarks.voice's `replay_settings(local_intents=False)`."""
CHROMIUM = "/usr/bin/chromium"
SETTLE_S = 2.0
"""Time given `parley web` after a turn for the next prompt's beginning (which it reads
between turns, as voice does), before anything else runs beside it."""

# Timestamps what the page sends and receives, on the page's clock: each microphone frame
# (and its samples, to find the recording in them), each audio frame, each state.
PAGE_PROBE = """(() => {
  const bench = window.__bench = {sent: [], samples: [], audio: [], states: []};
  const Native = window.WebSocket, send = Native.prototype.send;
  Native.prototype.send = function (data) {
    if (data instanceof ArrayBuffer) {
      bench.sent.push([performance.now(), data.byteLength / 2]);
      for (const s of new Int16Array(data)) bench.samples.push(s);
    }
    return send.call(this, data);
  };
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (m) => {
        const now = performance.now();
        if (typeof m.data !== "string") { bench.audio.push(now); return; }
        const d = JSON.parse(m.data);
        if (d.type === "state") bench.states.push([now, d.state]);
      });
    }
  };
})();"""
SPOKEN_AND_LISTENING = """() => { const s = window.__bench.states.map(x => x[1]);
  const i = s.lastIndexOf("speaking"); return i >= 0 && s.slice(i + 1).includes("listening"); }"""


@dataclass
class Clip:
    name: str
    pcm: np.ndarray
    """The recording between LEAD_S and TAIL_S of silence."""
    end: int
    """The sample after its last loud 10 ms: the end of speech."""


def clips(turns: int) -> list[Clip]:
    out = []
    for sample in (samples.librivox() + samples.commands())[:turns]:
        loud = loudness(sample.pcm)
        last = int(np.nonzero(loud > loud.max() - 30)[0][-1])
        lead, tail = np.zeros(int(LEAD_S * RATE), np.int16), np.zeros(int(TAIL_S * RATE),
                                                                       np.int16)
        out.append(Clip(sample.name, np.concatenate([lead, sample.pcm, tail]),
                        len(lead) + (last + 1) * RATE // 100))
    return out


def end_of_speech(deliveries: list[tuple[float, int]], end: int) -> float:
    """When the sample `end` was said, on the clock of `deliveries` ((time, samples up to
    then) per block): the earliest any block came after its last sample was due."""
    return min(t - upto / RATE for t, upto in deliveries) + end / RATE


# -- parley voice ---------------------------------------------------------------------------

class TimedSpeaker(MemorySpeaker):
    """Plays at once (as benchmarks.voice's speaker), noting when each chunk was handed
    to it."""

    def __init__(self) -> None:
        super().__init__(realtime=False, keep_chunks=False)
        self.asked: list[float] = []

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        self.asked.append(time.monotonic())
        super().play(pcm, sample_rate, cancel_echo)


def voice_turn(loop, speaker: TimedSpeaker, clip: Clip) -> tuple[float, float]:
    """One recording said to the voice loop in 30 ms blocks; ms to the first audio, and
    the loop's own figure (from the end of speech its segmenter heard)."""
    deliveries, started = [], time.monotonic()
    for upto in range(VOICE_BLOCK, len(clip.pcm) + 1, VOICE_BLOCK):
        time.sleep(max(0.0, started + upto / RATE - time.monotonic()))
        loop.feed_audio(clip.pcm[upto - VOICE_BLOCK:upto])
        deliveries.append((time.monotonic(), upto))
    loop.wait_replied(TURN_S)
    said = end_of_speech(deliveries, clip.end)
    first = next((t for t in speaker.asked if t > said), None)
    loop.wait_idle(TURN_S)  # the next prompt prepared, as before the next person speaks
    own = loop.records[-1].timings.latency_ms if loop.records else None
    return (float("nan") if first is None else (first - said) * 1000,
            float("nan") if own is None else own)


# -- parley web ----------------------------------------------------------------------------

class WebProcess:
    """`parley web` on a free port, with the latency runs' flags."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(parley("web", "--uri", "http://127.0.0.1:0", *flags),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True,
                                        env=env or environment())
        assert self.process.stdout is not None and self.process.stderr is not None
        self.stdout, self.stderr = Lines(self.process.stdout), Lines(self.process.stderr)
        ready = self.stdout.wait_for(re.compile(r"^Parley is at (http://[^/]+)/\?token=(\S+)$"),
                                     START_S)
        if ready is None:
            self.stop()
            raise SystemExit(f"parley web did not start:\n{self.stderr.text(1)}")
        self.url, self.token = ready.group(1), ready.group(2)

    @property
    def page(self) -> str:
        return f"{self.url}/?token={self.token}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        self.process.wait(60)


def socket_turn(web: WebProcess, clip: Clip, stop: bool = True) -> float:
    """The recording sent as the page sends it, in 30 ms frames at real-time pace, and
    silence after it (a microphone goes on) until the reply's first audio frame, which
    Stop then ends (or, not `stop`, until it was spoken); ms from the end of speech to
    that frame."""
    from websockets.sync.client import connect

    audio: list[float] = []
    listening = threading.Event()
    deliveries: list[tuple[float, int]] = []
    with connect(f"ws://{web.url.split('//')[1]}/ws?token={web.token}") as tab:
        def receive() -> None:
            for message in tab:
                if isinstance(message, bytes):
                    audio.append(time.monotonic())
                elif audio and json.loads(message).get("state") == "listening":
                    listening.set()

        threading.Thread(target=receive, daemon=True).start()
        tab.send(json.dumps({"type": "hands-free", "on": True}))
        silence = np.zeros(PAGE_FRAME, "<i2").tobytes()
        started, upto, said = time.monotonic(), 0, float("inf")
        while not (audio and audio[-1] > said if stop else listening.is_set()) \
                and time.monotonic() < started + TURN_S:
            upto += PAGE_FRAME
            time.sleep(max(0.0, started + upto / RATE - time.monotonic()))
            frame = clip.pcm[upto - PAGE_FRAME:upto]
            tab.send(frame.astype("<i2").tobytes() if len(frame) == PAGE_FRAME else silence)
            deliveries.append((time.monotonic(), upto))
            if upto >= clip.end:
                said = end_of_speech(deliveries, clip.end)
        if stop:
            tab.send(json.dumps({"type": "stop"}))
            listening.wait(TURN_S)
        tab.send(json.dumps({"type": "hands-free", "on": False}))
    first = next((t for t in audio if t > said), None)
    return float("nan") if first is None else (first - said) * 1000


def page_browser(playwright, wav: Path):
    """One Chromium for every page turn, started before any is timed (its start-up would
    otherwise run beside the turn on a small machine): its fake microphone plays `wav`,
    read afresh each time a page opens the microphone."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[
        "--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
        f"--use-file-for-fake-audio-capture={wav}%noloop"])


def page_turn(browser, web: WebProcess, clip: Clip, wav: Path) -> tuple[float, str]:
    """The recording played by Chromium's fake microphone into a new page until the reply's
    first audio frame, which the page's Stop button then ends; ms from the end of speech
    to that frame, and a note if the recording was not found in what the page sent."""
    soundfile.write(wav, clip.pcm, RATE, subtype="PCM_16")
    page = browser.new_page()
    try:
        page.add_init_script(PAGE_PROBE)
        page.goto(web.page)
        page.get_by_role("status").filter(has_text="Idle").wait_for()
        time.sleep(SETTLE_S)  # the page loaded and idle, as a user's is before they speak
        page.get_by_role("switch", name="Hands-free").click()
        # Audio after the end of speech (a reply begun at a pause may be taken back):
        # the frame holding it is sent after the first frame past it, however aligned.
        page.wait_for_function(f"""() => {{ const b = window.__bench; let n = 0;
            const past = b.sent.find(x => (n += x[1]) > {clip.end + PAGE_FRAME});
            return past && b.audio.some(t => t > past[0]); }}""", timeout=TURN_S * 1000,
                               polling=100)
        page.get_by_role("button", name="Stop").click()
        page.wait_for_function(SPOKEN_AND_LISTENING, timeout=TURN_S * 1000)
        page.get_by_role("switch", name="Hands-free").click()
        bench = page.evaluate("window.__bench")
    finally:
        page.close()  # and its microphone: the next page's opens the file afresh
    lag, fit = locate(np.array(bench["samples"], dtype=float), clip.pcm.astype(float))
    upto, deliveries = 0, []
    for at, count in bench["sent"]:
        upto += count
        deliveries.append((at / 1000, upto - lag))  # in the recording's samples
    said = end_of_speech(deliveries, clip.end)
    first = next((t / 1000 for t in bench["audio"] if t / 1000 > said), None)
    note = "" if fit > 0.8 else f"{clip.name}: found in what the page sent with fit {fit:.2f}"
    return (float("nan") if first is None else (first - said) * 1000), note


def loudness(pcm: np.ndarray) -> np.ndarray:
    """dB per 10 ms."""
    window = RATE // 100
    blocks = pcm[:len(pcm) // window * window].astype(float).reshape(-1, window)
    return 20 * np.log10(np.sqrt(np.mean(blocks ** 2, axis=1)) + 1)


def locate(sent: np.ndarray, recording: np.ndarray) -> tuple[int, float]:
    """Where the recording starts in what the page sent (the microphone opens a little
    after the fake file began), and how well their loudness matches there: the browser's
    echo cancellation and resampling change the samples, not the shape."""
    lag = offset_in(sent, recording)
    start, stop = max(0, lag), min(len(sent), lag + len(recording))
    a, b = loudness(sent[start:stop]), loudness(recording[start - lag:stop - lag])
    fit = float(np.corrcoef(a, b)[0, 1]) if len(a) > 100 and a.std() and b.std() else 0.0
    return lag, fit
