"""Ctrl-C while models load: held until the load returns, never raised mid-import."""

from __future__ import annotations

import os
import signal

import pytest

from models.interrupts import interrupts_deferred


def test_a_ctrl_c_during_the_load_is_raised_once_the_load_returns():
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)  # handled here, at the next bytecode
            import json  # noqa: F401  (an import after the press: not interrupted)
            done.append("the load went on to its end")
    assert done == ["the load went on to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_the_load_returns_as_ever():
    with interrupts_deferred():
        value = 1 + 1
    assert value == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
