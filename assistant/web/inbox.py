"""What a tab sends `parley web`, read and handed to the room (docs/web.md): JSON text
messages (text, stop, confirm, talk, hands-free) and binary frames of microphone audio.
What cannot be taken is an `error` event to that tab alone; the conversation goes on."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol

import numpy as np

from assistant.events import Error, Stage
from assistant.web.tabs import Tab, Tabs

BUSY = ("Parley is still answering the last message. Wait for it to finish, or press Stop, "
        "then send this again.")
KINDS = "text, stop, confirm, talk or hands-free"


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


def receive(room: Room, raw: str | bytes, tab: Tab) -> None:
    """One message from `tab`: JSON text, or (bytes) microphone audio."""
    if isinstance(raw, bytes):
        _audio(room, raw, tab)
        return
    try:
        message = json.loads(raw)
    except ValueError:
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


def _audio(room: Room, raw: bytes, tab: Tab) -> None:
    if room.voice is None:
        tab.send(voice_off(room))
    elif len(raw) % 2:
        tab.send(refused("Audio frames are 16-bit samples: this one has an odd number of "
                         "bytes."))
    elif raw:
        room.voice.hear(tab, np.frombuffer(raw, dtype="<i2").astype(np.int16))


def voice_off(room: Room) -> dict:
    return refused(f"Voice is off: {room.tabs.voice_off}. Type instead.")


def refused(message: str) -> dict:
    return Error(Stage.REQUEST, message).to_dict()
