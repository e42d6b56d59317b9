"""`parley voice`, `parley replay` and `parley devices`: building the engines from flags."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

from rich.console import Console

from assistant.errors import AssistantError, ConfigError
from assistant.events import Event, Heard, Interrupted, ReplyDone, Spoken

VOICE_HISTORY_MESSAGES = 400
"""A voice conversation keeps at most this many messages (the record's voice limit)."""


def add_voice_flags(parser: argparse.ArgumentParser, suppress: bool = False,
                    devices: bool = True) -> None:
    from assistant.cli.main import _env, _Group

    speech = _Group(parser.add_argument_group("speech"), suppress)
    speech.add_argument("--stt-model", type=Path, default=_env("stt_model", None),
                        help="a CTranslate2 Whisper model folder (default: the embedded "
                             "tiny.en)")
    speech.add_argument("--voice", type=Path, default=_env("voice", None),
                        help="a Piper voice .onnx, with its .onnx.json beside it (default: "
                             "the embedded en_US joe)")
    speech.add_argument("--stt-threads", type=int, default=int(_env("stt_threads", "2")),
                        help="speech-to-text threads (default 2)")
    speech.add_argument("--tts-threads", type=int, default=int(_env("tts_threads", "2")),
                        help="text-to-speech threads (default 2)")
    listen = _Group(parser.add_argument_group("listening"), suppress)
    if devices:
        listen.add_argument("--push-to-talk", action="store_true",
                            default=_env("push_to_talk", "") in ("1", "true", "yes"),
                            help="Enter starts listening; the utterance ends at the "
                                 "end-of-speech silence or at the next Enter")
        listen.add_argument("--input-device", default=_env("input_device", None),
                            help="microphone: an index or part of a name from `parley "
                                 "devices` (default: the system's)")
        listen.add_argument("--output-device", default=_env("output_device", None),
                            help="speaker: an index or part of a name (default: the system's)")
    listen.add_argument("--vad-aggressiveness", type=int,
                        default=int(_env("vad_aggressiveness", "2")),
                        help="0 (hears most) to 3 (ignores most noise); default 2")
    listen.add_argument("--pre-roll-ms", type=int, default=int(_env("pre_roll_ms", "300")),
                        help="audio kept from before speech was detected (default 300)")
    listen.add_argument("--end-silence-ms", type=int,
                        default=int(_env("end_silence_ms", "700")),
                        help="silence that ends an utterance (default 700)")
    listen.add_argument("--min-speech-ms", type=int, default=int(_env("min_speech_ms", "250")),
                        help="shorter sounds are ignored as noise (default 250)")
    listen.add_argument("--max-utterance-s", type=float,
                        default=float(_env("max_utterance_s", "20")),
                        help="an utterance is cut here and goes on as the next (default 20)")
    listen.add_argument("--barge-in", action="store_true",
                        default=_env("barge_in", "") in ("1", "true", "yes"),
                        help="listen while speaking: your speech stops the reply (use a "
                             "headset or an echo canceller)")
    listen.add_argument("--echo-tail-ms", type=int, default=int(_env("echo_tail_ms", "300")),
                        help="without --barge-in, keep ignoring the microphone this long "
                             "after speaking (default 300)")


def segmenter_settings(args: argparse.Namespace):
    from audio.segmenter import SegmenterSettings

    try:
        return SegmenterSettings(
            aggressiveness=args.vad_aggressiveness, pre_roll_ms=args.pre_roll_ms,
            end_silence_ms=args.end_silence_ms, min_speech_ms=args.min_speech_ms,
            max_utterance_s=args.max_utterance_s)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def voice_settings(args: argparse.Namespace, push_to_talk: bool = False):
    from assistant.voice.loop import VoiceSettings

    try:
        return VoiceSettings(push_to_talk=push_to_talk, barge_in=args.barge_in,
                             echo_tail_ms=args.echo_tail_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def load_speech_engines(args: argparse.Namespace):
    """The speech-to-text and text-to-speech engines the flags ask for."""
    from models.speech import SpeechEngineError
    from models.whisper_stt import WhisperSpeechToText

    try:
        stt = WhisperSpeechToText(args.stt_model, threads=args.stt_threads)
        from models.piper_tts import PiperTextToSpeech

        tts = PiperTextToSpeech(args.voice, threads=args.tts_threads)
    except SpeechEngineError as exc:
        raise ConfigError(str(exc)) from exc
    return stt, tts


def voice_conversation(args: argparse.Namespace):
    from dataclasses import replace

    from assistant.cli.main import load_conversation

    conversation = load_conversation(args)
    conversation.settings = replace(conversation.settings,
                                    max_messages=VOICE_HISTORY_MESSAGES)
    return conversation


# -- parley devices ------------------------------------------------------------------------

def run_devices() -> int:
    from audio.devices import format_device_table, list_devices

    try:
        print(format_device_table(list_devices()))
    except AssistantError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    return 0


def input_device_problem(args: argparse.Namespace) -> str | None:
    """Why live voice cannot start (no PortAudio, no microphone), or None if it can."""
    from audio.devices import find_device

    try:
        find_device(_device(args.input_device), "input")
    except AssistantError as exc:
        return str(exc)
    return None


def _device(spec: str | None) -> str | int | None:
    return int(spec) if spec is not None and spec.isdigit() else spec


# -- parley replay -----------------------------------------------------------------------

def run_replay(args: argparse.Namespace) -> int:
    from assistant.voice.loop import VoiceLoop
    from assistant.voice.replay import load_session, replay, session_json
    from audio.playback import MemorySpeaker
    from audio.segmenter import Segmenter

    try:
        turns = load_session(args.session)
        segmenter = Segmenter(segmenter_settings(args))
        settings = voice_settings(args)
        conversation = voice_conversation(args)
        stt, tts = load_speech_engines(args)
    except AssistantError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    barge_in_turns = any(t.during_reply_ms is not None for t in turns)
    # A barge-in needs a reply that is still playing, so those sessions play in real time.
    speaker = MemorySpeaker(realtime=not args.fast or barge_in_turns)
    loop = VoiceLoop(conversation, stt, tts, speaker, segmenter, settings,
                     keep_audio=args.audio_out is not None)
    try:
        produced = replay(loop, turns, fast=args.fast)
    finally:
        loop.close()
    document = session_json(loop, turns, produced)
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    if args.audio_out is not None:
        write_spoken_audio(args.audio_out, produced, tts.sample_rate)
    return 0


def write_spoken_audio(folder: Path, produced, sample_rate: int) -> None:
    import numpy as np

    from audio.files import write_wav

    folder.mkdir(parents=True, exist_ok=True)
    for number, records in enumerate(produced, start=1):
        chunks = [chunk for record in records for chunk in record.audio]
        if chunks:
            write_wav(folder / f"turn-{number:03d}.wav", np.concatenate(chunks), sample_rate)


# -- parley voice --------------------------------------------------------------------------

def quiet_native_stderr() -> None:
    """Send what C libraries write to stderr (ALSA's and PortAudio's diagnostics, dozens of
    lines a second while a device is gone) to /dev/null; Python's own stderr stays on the
    terminal. Parley's terminal is the user's, and Parley says what happened in one line."""
    sys.stderr.flush()
    terminal = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = os.fdopen(terminal, "w", buffering=1, encoding=sys.stderr.encoding,
                           errors="backslashreplace")


class VoiceScreen:
    """What the voice user sees: what was heard, the reply as it is spoken, the steps."""

    def __init__(self, chat) -> None:
        self.console = chat.console
        self._chat = chat
        """The text chat's renderer shows the steps, the streamed reply and errors."""

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
        elif isinstance(event, Spoken):
            return
        else:
            if isinstance(event, ReplyDone):
                out.print("")
                return
            self._chat.render(event)


def run_voice(args: argparse.Namespace, push_to_talk: bool) -> int:
    from assistant.voice.loop import VoiceLoop
    from audio.capture import DeviceLost, Microphone
    from audio.devices import find_device
    from audio.playback import Speaker
    from audio.segmenter import Segmenter

    console = Console(highlight=False, markup=False)
    quiet_native_stderr()
    try:
        input_device = find_device(_device(args.input_device), "input")
        output_device = find_device(_device(args.output_device), "output")
        segmenter = Segmenter(segmenter_settings(args))
        settings = voice_settings(args, push_to_talk)
        console.print("· Loading the language and speech models…", style="dim")
        conversation = voice_conversation(args)
        stt, tts = load_speech_engines(args)
        speaker = Speaker(output_device)
        microphone = Microphone(input_device)
        microphone.start()
    except AssistantError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    from assistant.cli.chat import ChatSession

    commands = ChatSession(conversation, interactive=True, console=console)
    screen = VoiceScreen(commands)
    loop = VoiceLoop(conversation, stt, tts, speaker, segmenter, settings, screen.render)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                pcm = microphone.read(0.1)
                if pcm is not None:
                    loop.feed_audio(pcm)
            except DeviceLost as exc:
                console.print(f"! {exc} The conversation is kept; type meanwhile.",
                              style="bold red")
                while not stop.wait(1.0):
                    try:
                        microphone.reopen()
                    except AssistantError:
                        continue
                    console.print("· Listening again.", style="dim")
                    break
            except Exception as exc:  # never go deaf silently
                if stop.is_set():
                    return
                console.print(f"! Listening failed ({exc}); trying again.", style="bold red")
                stop.wait(1.0)

    listener = threading.Thread(target=listen, name="listen", daemon=True)
    listener.start()
    how = ("Press Enter to talk, Enter again to stop" if push_to_talk
           else "Speak when you like")
    console.print(f"Parley is listening. {how}; or type a message. /help for commands, "
                  "Ctrl-D to quit.", style="dim")
    try:
        while True:
            try:
                line = console.input("")
            except KeyboardInterrupt:
                if loop.replying:
                    loop.interrupt()
                    continue
                break
            except EOFError:
                break
            line = line.strip()
            if not line:
                if push_to_talk:
                    loop.stop_listening() if loop.listening else loop.start_listening()
                continue
            if line.startswith("/"):
                if line.split()[0].lower() == "/clear":
                    loop.interrupt()  # a reply in progress must not land in the new one
                    loop.wait_idle()
                if not commands.command(line):
                    break
                continue
            loop.submit_text(line)
    finally:
        stop.set()
        listener.join(timeout=2)  # it feeds the loop: stop it before closing anything
        if not loop.close(timeout=1.0):
            console.print("· Finishing the model's current step…", style="dim")
            loop.close()
        microphone.close()
        speaker.close()
    return 0

