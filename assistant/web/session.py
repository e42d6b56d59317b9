"""The room `parley web` serves, built as `parley voice` builds its session: the voice
loop fed by the tabs' microphones and speaking to them. If the speech engines cannot load,
that is one line (`warn`) and the room is typed chat, built as `parley chat` builds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from assistant.errors import ModelError
from assistant.session import engines
from assistant.session.builder import Warn, chat_session, voice_session
from assistant.session.engines import Loaded
from assistant.session.settings import Settings
from assistant.web.room import ChatRoom
from assistant.web.speaker import WebSpeaker
from assistant.web.voice_room import EventRelay, VoiceRoom


@contextmanager
def web_room(settings: Settings, warn: Warn, loaded: Loaded | None = None
             ) -> Iterator[ChatRoom | VoiceRoom]:
    """The room, closed (its reply stopped and waited for) when the block ends. `loaded`:
    engines already loaded (tests' stand-ins), used instead of loading them."""
    loaded = loaded or Loaded()
    try:
        stt = loaded.stt or engines.load_stt(settings.speech)
        tts = loaded.tts or engines.load_tts(settings.speech)
    except ModelError as exc:
        reason = f"the speech engines could not load ({exc})"
        warn(f"Voice is off: {reason}. The page works as typed chat.")
        with chat_session(settings, warn, idle_summaries=True,
                          loaded=loaded) as built:
            room = ChatRoom(built.conversation, built.timers, reason)
            with _closing(room):
                yield room
        return
    speaker = WebSpeaker()
    events = EventRelay()
    # Set in the environment or the config file for voice, these are not the page's: the
    # browser cancels the echo, and the page has both Hands-free and Push to talk.
    settings = dataclasses.replace(settings, listening=dataclasses.replace(
        settings.listening, echo_cancel=False, push_to_talk=False))
    barge_in = settings.listening.barge_in

    def adjust(chosen, in_real_time: bool):
        # The page asks the browser to cancel Parley's voice in the microphone: the user
        # may speak over a reply unless told otherwise.
        return chosen if barge_in is not None else dataclasses.replace(chosen, barge_in=True)

    with voice_session(settings, lambda far_end: speaker, warn, render=events,
                       keep_records=False, adjust=adjust, show_all_between_turns=True,
                       loaded=dataclasses.replace(loaded, stt=stt, tts=tts)) as session:
        room = VoiceRoom(session, speaker, events)
        with _closing(room):
            yield room


@contextmanager
def _closing(room: ChatRoom | VoiceRoom) -> Iterator[None]:
    try:
        yield
    finally:
        room.close()
