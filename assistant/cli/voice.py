"""`parley voice`: a spoken conversation on the microphone and the speaker."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from assistant.cli.chat import ChatSession
from assistant.cli.devices import device
from assistant.cli.render import VoiceScreen
from assistant.cli.saved import announce, close_saved
from assistant.cli.terminal import read_line
from assistant.session.builder import VoiceSession, voice_session
from assistant.session.settings import Settings
from audio.errors import AudioError
from models.interrupts import interrupts_deferred

log = logging.getLogger(__name__)


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


def run_voice(settings: Settings) -> int:
    from audio.devices import find_device
    from audio.playback import Speaker

    console = Console(highlight=False, markup=False)
    quiet_native_stderr()
    # A bad setting, model or device raises one of USER_ERRORS: main() shows it in a line.
    listening = settings.listening
    input_device = find_device(device(listening.input_device), "input")
    output_device = find_device(device(listening.output_device), "output")
    screen = VoiceScreen(console)

    @contextmanager
    def loading() -> Iterator[None]:
        console.print("· Loading the language and speech models…", style="dim")
        # A Ctrl-C while the models load stops Parley once they are loaded: raised mid-load
        # it could land in importlib's lock callback and leave every later import waiting.
        with interrupts_deferred():
            yield

    with voice_session(settings, lambda far_end: Speaker(output_device, far_end=far_end),
                       lambda line: console.print(f"! {line}", style="bold red"),
                       render=screen.render, keep_records=False, loading=loading) as session:
        return _converse(session, input_device, console)


def _converse(session: VoiceSession, input_device, console: Console) -> int:
    from audio.capture import Microphone

    conversation, loop = session.conversation, session.loop
    announce(conversation, console)
    microphone = Microphone(input_device)
    microphone.start()
    commands = ChatSession(conversation, interactive=True, console=console,
                           timers=session.timers, mcp=session.mcp)
    stop = threading.Event()
    listener = threading.Thread(target=_listen, args=(session, microphone, console, stop),
                                name="listen", daemon=True)
    listener.start()
    try:
        _read_lines(session, commands, console)
    except KeyboardInterrupt:
        pass  # Ctrl-C between two lines, nothing being answered: it ends, as Ctrl-D does
    finally:
        stop.set()
        commands.end_timers()
        listener.join(timeout=2)  # it feeds the loop: stop it before closing anything
        if not loop.close(timeout=1.0):
            console.print("· Finishing the model's current step…", style="dim")
            loop.close()
        microphone.close()
        session.output.close()
        close_saved(conversation)  # after the loop: its last reply is saved first
    return 0


def _listen(session: VoiceSession, microphone, console: Console,
            stop: threading.Event) -> None:
    """Feed the microphone's audio to the loop (cleaned first, if it is) until `stop`; a
    device that goes away is said in a line and reopened when it is back."""
    from audio.capture import DeviceLost

    loop, cleaned = session.loop, session.microphone
    while not stop.is_set():
        try:
            pcm = microphone.read(0.1)
            if pcm is not None:
                loop.feed_audio(pcm if cleaned is None
                                else cleaned.process(pcm, microphone.last_block_end))
        except DeviceLost as exc:
            console.print(f"! {exc} The conversation is kept; type meanwhile.",
                          style="bold red")
            while not stop.wait(1.0):
                try:
                    microphone.reopen()
                except AudioError:
                    continue
                console.print("· Listening again.", style="dim")
                break
        except Exception as exc:  # a bug; never go deaf silently
            if stop.is_set():
                return
            log.exception("listening failed")
            console.print(f"! Listening failed ({exc}); trying again.", style="bold red")
            stop.wait(1.0)


def _read_lines(session: VoiceSession, commands: ChatSession, console: Console) -> None:
    """Typed lines until the user quits: a message, a /command, or (push-to-talk) Enter."""
    loop = session.loop
    push_to_talk, wake_word = session.settings.listening.push_to_talk, loop.wake_word
    how = ("Press Enter to talk, Enter again to stop" if push_to_talk
           else f"Say \u201c{wake_word.word.phrase}\u201d, then your request" if wake_word
           else "Speak when you like")
    # Said here, inside the caller's try: a Ctrl-C that lands while it is written ends it.
    console.print(f"Parley is listening. {how}; or type a message. /help for commands, "
                  "Ctrl-D to quit.", style="dim")
    while True:
        try:
            line = read_line(console)
        except KeyboardInterrupt:
            if loop.replying:
                loop.interrupt()
                continue
            return
        except EOFError:
            return
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
                return
            continue
        loop.submit_text(line)
