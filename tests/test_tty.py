"""Text chat in a real pseudo-terminal: Ctrl-C stops a reply and keeps the conversation."""

import os
import sys

import pexpect
import pytest

from tests.support.transcripts import HISTORY_TIME

pytestmark = pytest.mark.real


def spawn_chat() -> pexpect.spawn:
    """`parley chat` on the embedded model in a pseudo-terminal."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TERM="dumb", COLUMNS="120")
    return pexpect.spawn(sys.executable, ["-m", "assistant", "chat", "--ctx", "2048"],
                         env=env, encoding="utf-8", timeout=120)


def test_ctrl_c_stops_the_reply_and_the_conversation_goes_on():
    child = spawn_chat()
    try:
        child.expect("you> ")
        child.sendline("Write a very long story about a lighthouse keeper, in many paragraphs.")
        child.expect("many paragraphs.\r\n")  # the terminal's echo of the line
        child.expect(r"\w+ \w+ \w+")  # the reply has started streaming
        child.sendintr()
        child.expect(r"\[stopped\]")
        child.expect("you> ")
        child.sendline("/history")
        child.expect(r"#1 user" + HISTORY_TIME + r": Write a very long story")
        child.expect(r"#2 assistant" + HISTORY_TIME + r": ")
        child.expect("you> ")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
        # Its exit, however long a busy machine takes (close() would kill it after 0.1 s).
        assert child.wait() == 0
    finally:
        child.close()


def test_a_timer_goes_off_with_a_line_and_the_bell_while_the_user_is_idle():
    child = spawn_chat()
    try:
        child.expect("you> ")
        child.sendline("set a 2 second tea timer")
        child.expect("Your 2 second tea timer is set.")
        child.expect("you> ")
        # Nothing is typed: the timer's line and the bell arrive at the waiting prompt.
        child.expect("\a", timeout=30)
        child.expect("Your 2 second tea timer is done.")
        child.sendline("set a timer for 1 hour")
        child.expect("Your 1 hour timer is set.")
        child.expect("you> ")
        child.sendeof()
        child.expect(r"Cancelled the running timer: the 1 hour timer")
        child.expect(pexpect.EOF)
        assert child.wait() == 0
    finally:
        child.close()
