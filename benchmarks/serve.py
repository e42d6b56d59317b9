"""`python -m benchmarks.serve`: `parley serve` with 20 Home Assistant clients at once.

    python -m benchmarks.serve [--clients 20] [--requests-per-client 3] [--seconds 300]
        [--rounds 5] [--timeout 180] [--json FILE] [parley serve's flags, e.g. --ctx 4096]

Starts a real `parley serve` on a free loopback port and sends what Home Assistant sends,
each request on a new connection (wyoming's AsyncTcpClient): describe, speech-to-text of a
LibriVox recording, text-to-speech of a sentence, and conversation: a local intent ("What
time is it?") and a question for the model ("What is the capital of France?"). One client
does each kind in turn (after a round not counted: one-time set-up), then 20 clients at
once, each in its own conversation, until their budget or the deadline, while a prober sends
describe every 0.5 s (due within 1 s) and the server's memory is read every 0.2 s. Prints
served, failed and wrong requests per kind, latency for 1 and 20 clients, throughput,
describe under load and memory, and whether SIGINT stops the server with exit code 0.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import math
import queue
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import jiwer
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import Synthesize

from benchmarks.voice import p90
from tests.support import speech_samples as samples

HOST = "127.0.0.1"
READY = re.compile(r"Parley is serving Wyoming at tcp://([^:]+|\[[^\]]+\]):(\d+)")
KINDS = ("describe", "speech-to-text", "text-to-speech", "local intent", "model")
SENTENCE = "The kitchen lights are off, and the front door is locked for the night."
CHUNK_BYTES = 2048  # 64 ms a chunk, sent at once: the latency is the server's, not speech's
WRONG_WER = 0.5  # Whisper tiny.en gets these readings mostly right; more is a mix-up
DESCRIBE_DUE_S, PROBE_EVERY_S, SAMPLE_EVERY_S = 1.0, 0.5, 0.2
Answer = tuple[bool, str]  # sensible or not, and what came back (or why not)


class Refused(Exception):
    """The server answered `error` or `not-handled`, or closed the connection."""


@dataclass(frozen=True)
class Target:
    port: int
    timeout: float  # seconds a whole request may take, connection to answer
    clips: Iterator[samples.SpeechSample]  # the recordings, round and round


@dataclass
class Outcome:
    kind: str
    seconds: float
    served: bool
    sensible: bool
    answer: str  # what came back, or why it failed: for the notes under the table


async def read_until(client: AsyncTcpClient, wanted: str) -> list[Event]:
    events = []
    while True:
        event = await client.read_event()
        if event is None:
            raise Refused("the server closed the connection")
        if event.type in ("error", "not-handled"):
            why = [event.data.get(key) for key in ("code", "text")]
            raise Refused(f"{event.type}: " + " ".join(str(part) for part in why if part))
        events.append(event)
        if event.type == wanted:
            return events


async def describe(client: AsyncTcpClient, target: Target, conversation: str) -> Answer:
    await client.write_event(Describe().event())
    info = (await read_until(client, "info"))[-1].data
    return all(info.get(key) for key in ("asr", "tts", "handle")), "info"


async def speech_to_text(client: AsyncTcpClient, target: Target, conversation: str) -> Answer:
    clip = next(target.clips)
    audio = clip.pcm.astype("<i2").tobytes()
    audio_format = {"rate": samples.SAMPLE_RATE, "width": 2, "channels": 1}
    await client.write_event(Transcribe(language="en").event())
    await client.write_event(AudioStart(**audio_format).event())
    for start in range(0, len(audio), CHUNK_BYTES):
        chunk = audio[start:start + CHUNK_BYTES]
        await client.write_event(AudioChunk(audio=chunk, **audio_format).event())
    await client.write_event(AudioStop().event())
    text = (await read_until(client, "transcript"))[-1].data.get("text") or ""
    wer = jiwer.wer(samples.words(clip.transcript), samples.words(text) or "-")
    return wer <= WRONG_WER, f"{text!r} (said: {clip.transcript!r})"


async def text_to_speech(client: AsyncTcpClient, target: Target, conversation: str) -> Answer:
    await client.write_event(Synthesize(text=SENTENCE).event())
    events = await read_until(client, "audio-stop")
    rate = next((e.data.get("rate") for e in events if e.type == "audio-start"), None)
    size = sum(len(e.payload or b"") for e in events if e.type == "audio-chunk")
    seconds = size / 2 / rate if rate else 0.0
    return seconds > 1.0, f"{seconds:.1f} s of audio at {rate} Hz"  # the sentence is ~4 s


async def converse(question: str, expected: str, client: AsyncTcpClient, target: Target,
                   conversation: str) -> Answer:
    """Sensible: the reply matches `expected` and comes back in the same conversation."""
    context = {"conversation_id": conversation}
    await client.write_event(Transcript(text=question, context=context).event())
    handled = (await read_until(client, "handled"))[-1].data
    text = handled.get("text") or ""
    same = (handled.get("context") or {}).get("conversation_id") == conversation
    return same and re.search(expected, text, re.I) is not None, repr(text)


ASKS: dict[str, Callable[[AsyncTcpClient, Target, str], Awaitable[Answer]]] = dict(zip(KINDS, (
    describe, speech_to_text, text_to_speech,
    functools.partial(converse, "What time is it?", r"\d:\d\d"),
    functools.partial(converse, "What is the capital of France?", "paris")), strict=True))


async def request(target: Target, kind: str, conversation: str) -> Outcome:
    """One request on its own connection, timed from connecting to the answer."""
    started = time.perf_counter()
    try:
        async with AsyncTcpClient(HOST, target.port, connect_timeout=5.0) as client:
            asking = ASKS[kind](client, target, conversation)
            sensible, answer = await asyncio.wait_for(asking, target.timeout)
            return Outcome(kind, time.perf_counter() - started, True, sensible, answer)
    except (Refused, TimeoutError, OSError, EOFError) as exc:
        return Outcome(kind, time.perf_counter() - started, False, False,
                       str(exc) or f"no answer within {target.timeout:g} s")


async def client_loop(target: Target, number: int, budget: int, deadline: float,
                      outcomes: list[Outcome]) -> None:
    # The kinds in turn from the `number`th: the server always sees a mix of all five.
    for step in range(budget):
        if time.monotonic() >= deadline:
            return  # a request in flight at the deadline finishes (within --timeout)
        kind = KINDS[(number + step) % len(KINDS)]
        outcomes.append(await request(target, kind, f"bench-client-{number}"))


async def probe(target: Target, stop: asyncio.Event) -> list[Outcome]:
    """describe every PROBE_EVERY_S until `stop`: info is due within 1 s, busy or not."""
    found: list[Outcome] = []
    quick = replace(target, timeout=10 * DESCRIBE_DUE_S)
    while not stop.is_set():
        next_at = time.monotonic() + PROBE_EVERY_S
        found.append(await request(quick, "describe", ""))
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return found


async def clients_at_once(target: Target, clients: int, budget: int, seconds: float,
                          probing: bool) -> tuple[list[Outcome], list[Outcome], float]:
    """The clients' outcomes, the prober's (if `probing`), and the time the clients took."""
    outcomes: list[Outcome] = []
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(target, stop)) if probing else None
    deadline, started = time.monotonic() + seconds, time.perf_counter()
    await asyncio.gather(*(client_loop(target, number, budget, deadline, outcomes)
                           for number in range(clients)))
    took = time.perf_counter() - started
    stop.set()
    return outcomes, await prober if prober else [], took


class Server:
    """`parley serve` on a free loopback port, its output (stdout and stderr) drained."""

    def __init__(self, engine_flags: list[str]) -> None:
        parley = str(Path(sys.executable).with_name("parley"))  # the venv's, as soak runs it
        self.process = subprocess.Popen(
            [parley, "serve", "--uri", f"tcp://{HOST}:0", *engine_flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1)
        # None: the output has ended. Drained all along: a full pipe would stall the server.
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_ready(self, timeout: float) -> int:
        """The port from the ready line."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(f"parley serve was not ready in {timeout:.0f} s") from None
            if line is None:
                raise SystemExit(f"parley serve exited before it was ready (exit code "
                                 f"{self.process.wait()}); its output is above")
            if match := READY.search(line):
                return int(match[2])
            print(f"    server: {line.strip()}", flush=True)

    def stop(self, timeout: float = 60.0) -> tuple[int | None, float]:
        """SIGINT, as Ctrl-C: the exit code (None: it did not stop) and the time taken."""
        started = time.perf_counter()
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout), time.perf_counter() - started
        except subprocess.TimeoutExpired:
            return None, time.perf_counter() - started


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (the kernel's peak, between samples too), in MB."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {name: int(value.split()[0]) / 1024 for name, _, value in
            (line.partition(":") for line in lines) if name in ("VmRSS", "VmHWM")}


class MemorySampler(threading.Thread):
    """The server's resident memory every SAMPLE_EVERY_S, the peak of each phase kept."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="memory sampler", daemon=True)
        self.pid, self.phase, self.done = pid, "start", threading.Event()
        self.peaks: dict[str, float] = {}

    def run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY_S):
            try:
                resident = memory_mb(self.pid)["VmRSS"]
            except (OSError, KeyError):
                return  # the server has exited
            self.peaks[self.phase] = max(resident, self.peaks.get(self.phase, 0.0))


def spread(values_ms: list[float]) -> dict[str, float | None]:
    if not values_ms:
        return dict.fromkeys(("p50_ms", "p90_ms", "max_ms"))
    return {"p50_ms": statistics.median(values_ms), "p90_ms": p90(values_ms),
            "max_ms": max(values_ms)}


def by_kind(outcomes: list[Outcome], seconds: float) -> dict:
    """Served, failed and wrong per kind, latency of the served ones, and throughput."""
    kinds = {}
    for kind in KINDS:
        mine = [o for o in outcomes if o.kind == kind]
        served = [o.seconds * 1000 for o in mine if o.served]
        kinds[kind] = {"served": len(served), "failed": len(mine) - len(served),
                       "wrong": sum(o.served and not o.sensible for o in mine), **spread(served)}
    served = sum(o.served for o in outcomes)
    # The first failed and the first wrong answer of each kind (reversed: the first is kept).
    notes = {(o.kind, o.served): f"{o.kind}, {'wrong' if o.served else 'failed'}: "
             f"{o.answer[:160]}" for o in reversed(outcomes) if not o.sensible}
    return {"kinds": kinds, "seconds": seconds, "served": served,
            "requests_per_second": served / seconds if seconds else 0.0,
            "notes": sorted(notes.values())}


def probed(outcomes: list[Outcome]) -> dict:
    answered = [o.seconds * 1000 for o in outcomes if o.served]
    late = sum(not o.served or o.seconds > DESCRIBE_DUE_S for o in outcomes)
    return {"probes": len(outcomes), "failed": len(outcomes) - len(answered),
            "over_1s_or_failed": late, **spread(answered)}


def _ms(value: float | None, width: int = 9) -> str:
    return f"{value:{width}.0f}" if value is not None else f"{'-':>{width}s}"


def show(figures: dict, clients: int) -> None:
    server, one, many = figures["server"], figures["one_client"], figures["many_clients"]
    print(f"\nparley serve (engine flags: {' '.join(server['engine_flags']) or 'none'}), ready "
          f"{server['ready_s']:.1f} s after launch; each request on a new connection")
    print(f"  {'kind':16s} {'clients':>7s} {'served':>7s} {'failed':>7s} {'wrong':>6s} "
          f"{'p50 ms':>9s} {'p90 ms':>9s} {'max ms':>9s}  p50 ratio")
    for kind in KINDS:
        base = one["kinds"][kind]["p50_ms"]
        for count, run in ((1, one), (clients, many)):
            row = run["kinds"][kind]
            p50 = row["p50_ms"]
            ratio = f"  {p50 / base:8.2f}x" if count > 1 and base and p50 is not None else ""
            print(f"  {kind:16s} {count:7d} {row['served']:7d} {row['failed']:7d} "
                  f"{row['wrong']:6d} {_ms(p50)} {_ms(row['p90_ms'])} {_ms(row['max_ms'])}{ratio}")
    print("  throughput: " + ", ".join(
        f"{count} client{'s' if count > 1 else ''} {run['requests_per_second']:.2f} requests/s "
        f"({run['served']} served in {run['seconds']:.1f} s)"
        for count, run in ((1, one), (clients, many))))
    probes = figures["describe_under_load"]
    print(f"  describe while {clients} clients load it, every {PROBE_EVERY_S} s ({probes['probes']}"
          f" probes): p50 {_ms(probes['p50_ms'], 0)} ms, p90 {_ms(probes['p90_ms'], 0)} ms, max "
          f"{_ms(probes['max_ms'], 0)} ms; over {DESCRIBE_DUE_S:.0f} s or failed: "
          f"{probes['over_1s_or_failed']} (failed {probes['failed']})")
    print("  server resident memory: {start:.0f} MB when ready, peak {peak:.0f} MB (1 client "
          "{peak_one_client:.0f}, {n} clients {peak_many_clients:.0f}; VmHWM {hwm:.0f}), {end:.0f} "
          "MB at the end".format(n=clients, **figures["memory_mb"]))
    print(f"  stopped with SIGINT in {server['stop_s']:.1f} s: exit code {server['exit_code']}"
          + ("" if server["exit_code"] == 0 else " (want 0; None: it did not stop)"))
    for label, run in (("1 client", one), (f"{clients} clients", many)):
        print("".join(f"  {label}, {note}\n" for note in run["notes"]), end="")
    print("  latency: connecting to the answer (to audio-stop for text-to-speech), served "
          "requests only. wrong: a transcript with over half its words wrong, a reply without "
          "the time or without Paris (or in another conversation), under 1 s of speech.")


def measure(args: argparse.Namespace, engine_flags: list[str]) -> dict:
    launched = time.perf_counter()
    server = Server(engine_flags)
    sampler = MemorySampler(server.process.pid)
    try:
        port = server.wait_ready(args.start_timeout)
        ready_s, at_start = time.perf_counter() - launched, memory_mb(server.process.pid)["VmRSS"]
        sampler.start()
        target = Target(port, args.timeout, itertools.cycle(samples.librivox()))
        print(f"  ready on port {port}; a round of each kind, not counted, then 1 client, "
              f"{args.rounds} rounds", flush=True)
        asyncio.run(clients_at_once(target, 1, len(KINDS), math.inf, probing=False))
        sampler.phase = "one client"
        one, _, one_s = asyncio.run(clients_at_once(
            target, 1, args.rounds * len(KINDS), math.inf, probing=False))
        sampler.phase = "many clients"
        print(f"  {args.clients} clients, {args.requests_per_client} requests each "
              f"(deadline {args.seconds:.0f} s)", flush=True)
        many, probes, many_s = asyncio.run(clients_at_once(
            target, args.clients, args.requests_per_client, args.seconds, probing=True))
        at_end = memory_mb(server.process.pid)
        exit_code, stop_s = server.stop()
    finally:
        sampler.done.set()
        if server.process.poll() is None:  # on any error too: never leave a server behind
            server.process.kill()
            server.process.wait()
    peaks = sampler.peaks
    return {
        "server": {"engine_flags": engine_flags, "ready_s": ready_s, "exit_code": exit_code,
                   "stop_s": stop_s},
        "one_client": by_kind(one, one_s), "many_clients": by_kind(many, many_s),
        "describe_under_load": probed(probes),
        "memory_mb": {"start": at_start, "peak": max([at_start, *peaks.values()]),
                      "peak_one_client": peaks.get("one client", 0.0),
                      "peak_many_clients": peaks.get("many clients", 0.0),
                      "hwm": at_end["VmHWM"], "end": at_end["VmRSS"]},
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serve", allow_abbrev=False,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Any other flag (e.g. --ctx 4096, --llm-model PATH, --threads 2) is passed to "
               "`parley serve`.")
    parser.add_argument("--clients", type=int, default=20, help="clients at once")
    parser.add_argument("--requests-per-client", type=int, default=3,
                        help="requests each client sends, one at a time, the kinds in turn")
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="deadline: no request starts after it; those in flight finish")
    parser.add_argument("--rounds", type=int, default=5, help="1-client rounds of each kind")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a request may take")
    parser.add_argument("--start-timeout", type=float, default=300.0,
                        help="seconds to wait for the server's ready line")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    return parser


def main(argv: list[str] | None = None) -> None:
    args, engine_flags = build_parser().parse_known_args(argv)
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    print(f"Starting parley serve on {HOST}, a free port…", flush=True)
    figures = measure(args, engine_flags)
    show(figures, args.clients)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if figures["server"]["exit_code"] != 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
