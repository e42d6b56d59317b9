"""What a tab sends `parley web`, read and handed to the room (docs/web.md): JSON text
messages (text, stop, confirm, talk, hands-free) and binary frames of microphone audio.
What cannot be taken is an `error` event to that tab alone; the conversation goes on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from assistant.events import Error, Stage
from assistant.web.tabs import Tab, Tabs
from models.speech import STT_SAMPLE_RATE

BUSY = ("Parley is still answering the last message. Wait for it to finish, or press Stop, "
        "then send this again.")
KINDS = "text, stop, confirm, talk or hands-free"
RATE = STT_SAMPLE_RATE
"""The tabs' audio: samples a second, as speech-to-text takes it."""
AUDIO_AHEAD_S = 2.0
"""How far a tab's audio may run ahead of real time (frames that waited on a slow network
arrive in a burst); beyond it, what arrives is dropped."""
TOO_FAST = (f"Audio is arriving faster than a microphone records it: Parley hears at most "
            f"real time (16 kHz) and {AUDIO_AHEAD_S:g} s ahead, and dropped the rest. Send "
            "the frames as they are recorded.")


class AudioPace:
    """How much of one tab's audio is heard: a microphone's worth, so a tab cannot make
    Parley hear an hour in a second, nor fill its memory with audio to get through."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at = clock()
        self._ahead = AUDIO_AHEAD_S * RATE
        """Samples the tab may still send beyond real time."""
        self.told = False
        """The tab was told once that audio was dropped (a flood is not answered by one)."""

    def take(self, samples: int) -> int:
        """How many of `samples` just received may be heard (the first ones)."""
        now = self._clock()
        self._ahead = min(AUDIO_AHEAD_S * RATE, self._ahead + (now - self._at) * RATE)
        self._at = now
        taken = min(samples, round(self._ahead))  # not int(): 0.03 s is 479.99… samples
        self._ahead -= taken
        return taken


class VoiceInput(Protocol):
    """A room that listens: the tabs' microphones."""

    def talk(self, tab: Tab, pressed: bool) -> None:
        """Push to talk pressed (listen from now) or released (the utterance ends)."""

    def hands_free(self, tab: Tab, on: bool) -> None:
        """The tab's Hands-free switch: its audio is listened to, or no longer."""

    def hear(self, tab: Tab, pcm: np.ndarray) -> None:
        """Audio from the tab's microphone, 16 kHz mono int16."""


class Room(Protocol):
    tabs: Tabs
    voice: VoiceInput | None
    """None: the speech engines did not load, and only typed chat works."""

    def join(self, tab: Tab) -> Callable[[], None]:
        """The tab connected; returns what to call when it leaves."""

    def ask(self, text: str) -> bool:
        """A typed message; False if Parley is still answering (it is refused)."""

    def stop(self) -> None: ...

    def answer(self, text: str) -> bool:
        """The answer to the question a tool asked; False if none is waiting."""


def receive(room: Room, raw: str | bytes, tab: Tab, pace: AudioPace) -> None:
    """One message from `tab`: JSON text, or (bytes) microphone audio, heard at `pace`."""
    if isinstance(raw, bytes):
        _audio(room, raw, tab, pace)
        return
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        message = None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        tab.send(refused(f"That message is not a JSON object with a \"type\" ({KINDS}); "
                         "see docs/web.md."))
        return
    kind = message["type"]
    if kind == "text":
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            tab.send(refused("A text message needs a non-empty \"text\"."))
        elif not room.ask(text):
            tab.send(refused(BUSY))
    elif kind == "stop":
        room.stop()
    elif kind == "confirm":
        answer = message.get("answer")
        if not isinstance(answer, str):
            tab.send(refused("A confirm message needs an \"answer\": yes or no."))
        elif not room.answer(answer):
            tab.send(refused("No question is waiting for an answer (it was answered "
                             "already, or the reply stopped)."))
    elif kind in ("talk", "hands-free"):
        _switch(room, kind, message, tab)
    else:
        tab.send(refused(f"Unknown message type {kind!r}: use {KINDS}."))


def _switch(room: Room, kind: str, message: dict, tab: Tab) -> None:
    key = "pressed" if kind == "talk" else "on"
    value = message.get(key)
    if not isinstance(value, bool):
        tab.send(refused(f"A {kind} message needs \"{key}\": true or false."))
    elif room.voice is None:
        tab.send(voice_off(room))
    elif kind == "talk":
        room.voice.talk(tab, value)
    else:
        room.voice.hands_free(tab, value)


def _audio(room: Room, raw: bytes, tab: Tab, pace: AudioPace) -> None:
    if len(raw) % 2:
        tab.send(refused("Audio frames are 16-bit samples (little-endian, 16 kHz mono): "
                         "this one has an odd number of bytes."))
        return
    taken = pace.take(len(raw) // 2)
    if taken < len(raw) // 2 and not pace.told:
        pace.told = True
        tab.send(refused(TOO_FAST))
    if not taken:
        return  # dropped: not even the answer that voice is off, a flood gets one error
    if room.voice is None:
        tab.send(voice_off(room))
    else:
        room.voice.hear(tab, np.frombuffer(raw[:taken * 2], dtype="<i2").astype(np.int16))


def voice_off(room: Room) -> dict:
    return refused(f"Voice is off: {room.tabs.voice_off}. Type instead.")


def refused(message: str) -> dict:
    return Error(Stage.REQUEST, message).to_dict()
