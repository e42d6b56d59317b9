"""`parley voice` through the real `main()` on stand-in sound devices (a silent microphone,
a speaker into memory) and a stand-in model: the command's own wiring, with what the user
types fed in one line per reply. The `voice` fixture (tests/conftest.py) sets it up."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from assistant.cli.main import main
from assistant.voice.loop import VoiceLoop
from audio.memory_out import MemorySpeaker
from tests.support.command_line import without_user_settings
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech


class SilentMicrophone:
    """A microphone that works and hears nothing."""

    def __init__(self, device=None, *args, **kwargs) -> None:
        self.device = device

    def start(self) -> None:
        pass

    def read(self, timeout: float):
        time.sleep(timeout)
        return None

    def reopen(self) -> None:
        pass

    def close(self) -> None:
        pass


class Typed:
    """What the user types, one line at a time once the previous reply has been spoken
    (a person reads the answer before typing the next line); then Ctrl-D."""

    def __init__(self, lines: list[str], loops: list[VoiceLoop]) -> None:
        self.lines = list(lines)
        self.loops = loops
        self.ended = False

    def readline(self) -> str:
        assert not self.ended, "parley voice went on reading after Ctrl-D"
        if self.loops:
            assert self.loops[0].wait_idle(60), "a reply never finished"
        if not self.lines:
            self.ended = True
            return ""
        return self.lines.pop(0) + "\n"

    def isatty(self) -> bool:
        return False


@dataclass
class VoiceCommand:
    """`parley voice` run through `main()`: its stand-in model, the voice loops it built."""

    model: ScriptedChatModel
    loops: list[VoiceLoop] = field(default_factory=list)

    @property
    def loop(self) -> VoiceLoop:
        assert len(self.loops) == 1, "parley voice built no voice loop"
        return self.loops[0]

    def run(self, monkeypatch, argv: list[str], typed: list[str] = ()) -> int:
        monkeypatch.setattr(sys, "stdin", Typed(list(typed), self.loops))
        return main(argv)


def voice_command(monkeypatch) -> VoiceCommand:
    """`parley voice` with stand-in sound devices and language model; the real settings,
    conversation, segmenter, voice loop and (unless a test replaces them) speech engines."""
    without_user_settings(monkeypatch)
    monkeypatch.setenv("COLUMNS", "300")  # /history lines stay whole
    command = VoiceCommand(ScriptedChatModel())

    class RecordedLoop(VoiceLoop):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            command.loops.append(self)

    monkeypatch.setattr("assistant.voice.loop.VoiceLoop", RecordedLoop)
    monkeypatch.setattr("audio.devices.find_device", lambda spec, kind, devices=None: None)
    monkeypatch.setattr("audio.capture.Microphone", SilentMicrophone)
    monkeypatch.setattr("audio.playback.Speaker", lambda device=None, **_: MemorySpeaker())
    # It moves file descriptor 2, which belongs to pytest here.
    monkeypatch.setattr("assistant.cli.voice.quiet_native_stderr", lambda: None)
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: command.model)
    return command


def stand_in_speech(monkeypatch) -> None:
    """The speech engines `parley voice` loads: a speech-to-text that hears "hello" in a
    clip of peak 4000, a text-to-speech speaking tones."""
    monkeypatch.setattr("assistant.session.engines.load_stt",
                        lambda args: ScriptedSpeechToText({4000: "hello"}))
    monkeypatch.setattr("assistant.session.engines.load_tts",
                        lambda args: ToneTextToSpeech(ms_per_char=1.0))
