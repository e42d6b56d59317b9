"""`parley voice` end to end on a real sound server: speech into a virtual microphone,
the reply out of a virtual speaker, through PortAudio, with the real embedded engines."""

import io
import os
import re
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

from audio.chime import NOTE_SECONDS, NOTES_HZ
from tests.support import speech_samples as samples
from tests.support.clips import recorded_speech, silence
from tests.support.live_voice import (
    full_history,
    quit_cleanly,
    spawn_voice,
    wait_for_history,
    wait_until_quiet,
    wait_until_speaking,
)
from tests.support.sound_server import SoundServer, running_sound_server
from tests.support.transcripts import HISTORY_TIME

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def server() -> Iterator[SoundServer]:
    with running_sound_server(needs_speech_samples=True) as srv:
        yield srv


def test_hands_free_hears_the_microphone_and_speaks_through_the_speaker(server):
    child = spawn_voice(server)
    try:
        pcm, transcript = recorded_speech()
        recording = server.record_monitor()
        server.feed(pcm)
        child.expect(r"you: ([^\r\n]+)")
        heard = child.match.group(1).lower()
        assert "young man" in heard, heard
        child.expect(r"\w+ \w+")  # the reply's text, shown as it is spoken
        server.wait_fed()
        # Wait for the reply to finish, then the speaker's monitor must hold its voice.
        wait_for_history(child, r"#2 assistant" + HISTORY_TIME + r": ")
        played = recording.stop()
        assert np.sqrt(np.mean(played.astype(np.float64) ** 2)) > 100, "nothing was played"
        # A typed line is a message in the same conversation.
        child.sendline("Thank you.")
        wait_for_history(child, r"#3 user" + HISTORY_TIME + r": Thank you\.")
        quit_cleanly(child)
    finally:
        child.close(force=True)


def test_push_to_talk_listens_only_after_enter(server):
    child = spawn_voice(server, "--push-to-talk")
    try:
        child.logfile_read = log = io.StringIO()
        before = samples.commands()[-1]  # "go forward ten meters"
        server.feed(np.concatenate([silence(1.0), before.pcm, silence(2.0)]))
        server.wait_fed()  # said before Enter: it must not be heard
        child.sendline("")
        child.expect("Listening")
        pcm, _ = recorded_speech()  # "he was not an ill disposed young man"
        server.feed(pcm)
        wait_for_history(child, r"#\d+ user" + HISTORY_TIME + r": [^\r\n]*young man")
        # Turns are answered in the order they were said: had the words before Enter been
        # heard, their message would be in the history by now, ahead of this one.
        history = full_history(child)
        users = {seq: text for seq, text in history.items() if text.startswith("user: ")}
        assert list(users) == [1] and "young man" in users[1].lower(), history
        heard = re.findall(r"^you: ([^\r\n]*)", log.getvalue(), re.MULTILINE)
        assert len(heard) == 1 and "young man" in heard[0].lower(), heard
        quit_cleanly(child)
    finally:
        child.close(force=True)


def test_a_vanished_microphone_keeps_the_conversation_and_listening_resumes(server):
    child = spawn_voice(server)
    try:
        child.logfile_read = log = io.StringIO()
        child.sendline("Remember the word lighthouse.")
        wait_for_history(child, r"#2 assistant" + HISTORY_TIME + r": ")
        server.kill()  # the sound server dies: the microphone is gone
        child.expect("The conversation is kept; type meanwhile", timeout=30)
        child.sendline("/history")  # the conversation is still there meanwhile
        child.expect(r"#1 user" + HISTORY_TIME + r": Remember the word lighthouse\.")
        server.restart()
        child.expect("Listening again", timeout=30)
        pcm, _ = recorded_speech()
        server.feed(pcm)
        child.expect(r"you: ([^\r\n]+)", timeout=60)
        assert "young man" in child.match.group(1).lower()
        wait_for_history(child, r"#3 user" + HISTORY_TIME + r": [^\r\n]*young man")
        quit_cleanly(child)
        # The sound libraries' own diagnostics do not flood the user's terminal.
        assert "ALSA lib" not in log.getvalue() and "Expression '" not in log.getvalue()
    finally:
        child.close(force=True)


def test_parley_devices_lists_the_sound_servers_devices(server):
    import subprocess

    env = dict(os.environ, **server.env, PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run([sys.executable, "-m", "assistant", "devices"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("pulse" in line for line in lines) and any("default" in line for line in lines)


def test_barge_in_through_the_real_devices_stops_the_reply(server):
    child = spawn_voice(server, "--barge-in", "--answer-tokens", "120")
    try:
        recording = server.record_monitor()
        child.sendline("Tell me a long story about a lighthouse keeper and the sea.")
        child.expect(r"\w+ \w+ \w+ \w+")  # the reply is being written
        wait_until_speaking(recording)  # the user talks over Parley's voice, not its thinking
        pcm, _ = recorded_speech()
        server.feed(pcm)  # the user talks over Parley
        child.expect(r"Stopped after (\d+\.\d) s of speech", timeout=60)
        assert float(child.match.group(1)) > 0  # it was heard for a while, then stopped
        child.expect(r"you: ([^\r\n]+)", timeout=60)
        assert "young man" in child.match.group(1).lower()
        wait_for_history(child, r"#3 user" + HISTORY_TIME + r": [^\r\n]*young man")
        played = recording.stop()
        assert played.size and np.abs(played).max() > 100  # it did speak before it stopped
        quit_cleanly(child)
    finally:
        child.close(force=True)


def strongest_pitch(pcm: np.ndarray, rate: int, low: float = 400.0, high: float = 3000.0) -> float:
    """The loudest frequency in `pcm` between `low` and `high` Hz."""
    spectrum = np.abs(np.fft.rfft(pcm.astype(np.float64) * np.hanning(pcm.size)))
    freqs = np.fft.rfftfreq(pcm.size, 1 / rate)
    band = (freqs >= low) & (freqs <= high)
    return float(freqs[band][np.argmax(spectrum[band])])


def test_a_timer_going_off_chimes_and_is_announced_through_the_speaker(server):
    child = spawn_voice(server)
    try:
        child.sendline("Set a 10 second timer.")
        child.expect("Your 10 second timer is set")
        # Once the confirmation has been spoken, the speaker is quiet until the timer ends.
        wait_for_history(child, r"assistant" + HISTORY_TIME + r": Your 10 second timer is set")
        wait_until_quiet(server.record_monitor())
        recording = server.record_monitor()
        child.expect(r"⏰ Your 10 second timer is done\.", timeout=60)
        wait_until_speaking(recording)
        time.sleep(3.0)  # the chime, then the announcement in Parley's voice
        played = recording.stop()
        rate = recording.rate
        onset = int(np.argmax(np.abs(played) > 100))
        note = int(NOTE_SECONDS * rate)
        # The chime's two rising notes come first (A5, then E6)...
        first = strongest_pitch(played[onset:onset + note], rate)
        second = strongest_pitch(played[onset + note:onset + 2 * note], rate)
        assert abs(first - NOTES_HZ[0]) < 40 and abs(second - NOTES_HZ[1]) < 40, (first, second)
        # ...then the spoken announcement.
        after = played[onset + int(0.5 * rate):]
        assert np.sqrt(np.mean(after.astype(np.float64) ** 2)) > 100, "no announcement"
        quit_cleanly(child)
    finally:
        child.close(force=True)
