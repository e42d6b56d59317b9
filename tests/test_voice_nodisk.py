"""`parley voice` on the private sound server writes nothing to disk: the microphone's audio,
the transcript, the reply and its speech, a typed message and a timer all stay in memory."""

from collections.abc import Iterator

import numpy as np
import pexpect
import pytest

from tests.support import espeak
from tests.support.clips import recorded_speech
from tests.support.live_voice import wait_for_history
from tests.support.nodisk import JACK_METADATA, changes_outside, guarded_env, guarded_parley, traced
from tests.support.sound_server import SoundServer, running_sound_server
from tests.support.transcripts import HISTORY_TIME

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def server() -> Iterator[SoundServer]:
    """One sound server for both sessions: each test starts its own traced `parley`."""
    with running_sound_server(needs_speech_samples=True) as srv:
        yield srv


@pytest.mark.parametrize("hands_free", [[], ["--wake-word", "okay_nabu", "--echo-cancel"]],
                         ids=["plain", "wake-word-and-echo-cancel"])
def test_a_spoken_and_typed_voice_session_writes_nothing_to_disk(server, tmp_path, hands_free):
    if hands_free and espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    log = tmp_path / "trace"
    command = traced(guarded_parley([
        "voice", "--input-device", "pulse", "--output-device", "pulse", "--ctx", "2048",
        "--answer-tokens", "40", *hands_free]), log)
    env = guarded_env(tmp_path, **server.env, TERM="dumb", COLUMNS="200")
    child = pexpect.spawn(command[0], command[1:], env=env, encoding="utf-8", timeout=180,
                          dimensions=(50, 250))
    try:
        child.expect("Parley is listening")
        pcm, _ = recorded_speech()
        if hands_free:  # the wake word first, then the same speech
            pcm = np.concatenate([espeak.espeak("Okay Nabu."), pcm])
        server.feed(pcm)
        child.expect(r"you: [^\r\n]*young man")
        wait_for_history(child, r"#2 assistant" + HISTORY_TIME + r": ")
        child.sendline("What is 6 times 7?")
        child.expect("42")
        child.sendline("Set a 2 second timer.")
        child.expect(r"⏰ Your 2 second timer is done\.", timeout=60)
        child.sendline("/quit")
        child.expect(pexpect.EOF, timeout=60)
        assert child.wait() == 0, child.before[-500:]
    finally:
        child.close(force=True)
    # Nowhere: not even the test's own folder, which holds only strace's log. Named
    # exceptions: libpulse opens the sound server's cookie read-write (to create it if it
    # were missing), and libjack its metadata database when PortAudio looks for JACK.
    assert [p.name for p in tmp_path.iterdir()] == ["trace"]
    assert changes_outside(log, [server.root / "cookie", JACK_METADATA]) == []
