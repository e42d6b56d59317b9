"""What Parley prints, as tests read it: the `/history` listing with or without times."""

from __future__ import annotations

import re

HISTORY_TIME = r", \w{3} \d{1,2} \w{3}(?: \d{4})? \d\d:\d\d"
"""When a message was said, as `/history` shows it after the role: a pattern for pexpect."""


def untimed(text: str) -> str:
    """`/history` lines without when each message was said, for tests about what was kept."""
    return re.sub(HISTORY_TIME + ":", ":", text)
