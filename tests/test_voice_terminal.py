"""Bare `parley` in a real pseudo-terminal: voice when a microphone works (on a private
PulseAudio server), text chat with stdin piped, and text chat with one line saying why when
no microphone works or the PortAudio library cannot load. Ctrl-D, or Ctrl-C while idle,
ends voice with exit code 0."""

import ctypes
import os
import platform
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.support import speech_samples as samples
from tests.support.clips import recorded_speech
from tests.support.live_voice import ended_cleanly, wait_for_history
from tests.support.serving import parley
from tests.support.sound_server import SoundServer, running_sound_server
from tests.support.transcripts import HISTORY_TIME

pytestmark = pytest.mark.real

SMALL = ("--ctx", "2048", "--answer-tokens", "40")
"""Top-level settings (no command given), so the model's prompt stays small."""

FALLBACK = "parley: starting text chat, because voice cannot start: "

# `parley` where the PortAudio C library cannot load: importing sounddevice raises what it
# raises when libportaudio is missing (sounddevice/__init__.py: OSError('PortAudio library
# not found')). Everything else is the real command.
NO_PORTAUDIO = textwrap.dedent("""
    import importlib.abc, importlib.machinery, sys

    class NoPortAudio(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            return importlib.machinery.ModuleSpec(name, self) if name == "sounddevice" else None
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            raise OSError("PortAudio library not found")

    sys.meta_path.insert(0, NoPortAudio())
    from assistant.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def server() -> Iterator[SoundServer]:
    with running_sound_server() as srv:
        yield srv


def environment(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TERM="dumb", COLUMNS="200", **extra)


def spawn(command: list[str], env: dict[str, str]) -> pexpect.spawn:
    return pexpect.spawn(command[0], command[1:], env=env, encoding="utf-8", timeout=120,
                         dimensions=(50, 250))


def no_microphone_env(tmp_path: Path) -> dict[str, str]:
    # A sound server that is not there: PortAudio then finds no input device.
    return environment(PULSE_SERVER=f"unix:{tmp_path}/no-such-socket")


def test_bare_parley_at_a_terminal_with_a_microphone_starts_voice_and_ctrl_d_ends_it(server):
    if not samples.available():
        pytest.skip(samples.missing_reason())
    child = spawn(parley(*SMALL), environment(**server.env))
    try:
        started = child.expect(["Parley is listening. Speak when you like", "you> "])
        assert started == 0 and "starting text chat" not in child.before, child.before
        pcm, _ = recorded_speech()
        server.feed(pcm)  # it hears the microphone: this is voice, not text chat
        child.expect(r"you: ([^\r\n]+)")
        assert "young man" in child.match.group(1).lower()
        wait_for_history(child, r"#2 assistant" + HISTORY_TIME + r": ")
        child.sendeof()
        ended_cleanly(child)
    finally:
        child.close(force=True)


def test_ctrl_c_while_voice_is_idle_ends_it(server):
    child = spawn(parley("voice", *SMALL[:2]), environment(**server.env))
    try:
        child.expect("Parley is listening")
        child.expect("Ctrl-D to quit")
        child.sendintr()  # nothing is being answered: Ctrl-C ends, as Ctrl-D does
        ended_cleanly(child)
    finally:
        child.close(force=True)


TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())
"""The tgkill(2) system call's number here: a signal to one thread of another process."""


def ctrl_c_to_a_thread_not_the_main_one(pid: int) -> None:
    """What the kernel may do with a Ctrl-C: hand the SIGINT to any thread not blocking it
    (one of llama.cpp's, say). Sent so on purpose, to one such thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    for task in sorted(int(name) for name in os.listdir(f"/proc/{pid}/task")):
        status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        blocked = int(status.split("SigBlk:")[1].split()[0], 16)
        if task != pid and not blocked & (1 << (signal.SIGINT - 1)):
            assert libc.syscall(TGKILL, pid, task, signal.SIGINT) == 0, ctypes.get_errno()
            return
    pytest.fail("no thread besides the main one takes SIGINT")


@pytest.mark.skipif(TGKILL is None, reason="tgkill's number is known for x86_64 and aarch64")
@pytest.mark.parametrize("command", ["voice", "chat"])
def test_a_ctrl_c_the_kernel_gives_another_thread_still_ends_parley(server, command):
    # Before, the main thread slept in input()'s read() and the Ctrl-C was never raised:
    # "^C" on screen, then nothing until Enter (seen in full test runs on a busy machine).
    child = spawn(parley(command, *SMALL[:2]), environment(**server.env))
    try:
        child.expect("Ctrl-D to quit")
        time.sleep(0.5)  # waiting for a line now
        ctrl_c_to_a_thread_not_the_main_one(child.pid)
        ended_cleanly(child)
    finally:
        child.close(force=True)


@pytest.mark.parametrize("after_s", [0.3, 0.6])
def test_ctrl_c_while_the_models_load_stops_quietly(server, after_s):
    # Ctrl-C at a few moments of the load (llama.cpp's log callback, onnxruntime's import,
    # which both turn it into something else): it stops with the shell's code for Ctrl-C,
    # or, if the load was done by then, ends voice as an idle Ctrl-C does; never a traceback.
    child = spawn(parley("voice", *SMALL[:2]), environment(**server.env))
    try:
        child.expect("Loading the language and speech models")
        time.sleep(after_s)
        child.sendintr()
        child.expect(pexpect.EOF, timeout=60)
        child.wait()
        assert child.exitstatus in (130, 0), (child.signalstatus, child.before[-500:])
        assert "Traceback" not in child.before, child.before[-2000:]
        if child.exitstatus == 0:
            assert "Parley is listening" in child.before
    finally:
        child.close(force=True)


def test_with_stdin_piped_bare_parley_is_text_chat_even_when_a_microphone_works(server):
    result = subprocess.run(parley(*SMALL), input=b"what time is it\n", capture_output=True,
                            env=environment(**server.env), timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = result.stdout.decode()
    assert "It's " in out and "listening" not in out
    assert "starting text chat" not in result.stderr.decode()  # chat by choice, not fallback


def test_bare_parley_with_no_working_microphone_says_why_in_one_line_and_chats(tmp_path):
    child = spawn(parley(*SMALL), no_microphone_env(tmp_path))
    try:
        child.expect("Parley: type a message")
        said = child.before.strip().splitlines()
        assert len(said) == 1 and said[0].startswith(FALLBACK + "No microphone"), said
        child.expect("you> ")
        child.sendline("what time is it")
        child.expect(r"It's \d{1,2}:\d\d [AP]M\.")
        child.expect("you> ")
        child.sendeof()
        ended_cleanly(child)
    finally:
        child.close(force=True)


MISSING_PORTAUDIO = FALLBACK + "The PortAudio library is missing (PortAudio library not found)"


def test_without_portaudio_bare_parley_says_why_in_one_line_and_chats(tmp_path):
    child = spawn([sys.executable, "-c", NO_PORTAUDIO, *SMALL], environment())
    try:
        child.expect("Parley: type a message")
        said = child.before.strip().splitlines()
        assert len(said) == 1 and said[0].startswith(MISSING_PORTAUDIO), said
        assert "apt install libportaudio2" in said[0]  # and what to do about it
        child.expect("you> ")
        child.sendline("what is 17 times 23")
        child.expect("391")
        child.expect("you> ")
        child.sendline("/history")
        child.expect(r"#1 user" + HISTORY_TIME + r": what is 17 times 23")
        child.expect(r"#3 assistant" + HISTORY_TIME + r": [^\r\n]*391")
        child.expect("you> ")
        child.sendline("Hello, who are you?")  # one the language model answers
        child.expect("you> ")
        child.sendline("/history")
        child.expect(r"#4 user" + HISTORY_TIME + r": Hello, who are you\?")
        child.expect(r"#5 assistant" + HISTORY_TIME + r": \S")
        child.expect("you> ")
        child.sendline("/quit")
        ended_cleanly(child)
    finally:
        child.close(force=True)


def test_without_portaudio_parley_voice_with_piped_input_is_text_chat_after_one_line():
    result = subprocess.run([sys.executable, "-c", NO_PORTAUDIO, "voice", *SMALL],
                            input=b"what time is it\n", capture_output=True, env=environment(),
                            timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    said = result.stderr.decode().splitlines()
    assert len(said) == 1 and said[0].startswith(MISSING_PORTAUDIO), said
    assert "It's " in result.stdout.decode()
