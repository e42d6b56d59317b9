"""The page's tests in the system's Chromium, driven by Playwright: importing this skips
the test module, saying why, when either is missing (under CI a skip fails)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.clocks import HUNG_S

sync_api = pytest.importorskip("playwright.sync_api",
                               reason="Playwright is missing: pip install -e '.[test]'")
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip("Chromium is missing: sudo apt install chromium (make test installs it)",
                allow_module_level=True)

expect = sync_api.expect
TIMEOUT_MS = HUNG_S * 1000
"""Only a hung page waits this long: no assertion depends on how fast the machine is."""


def prepared(page):
    """`page`, and every expectation, waiting up to `TIMEOUT_MS`."""
    page.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    return page


def entry(page, seq: int):
    """Message #`seq` of the conversation on the page."""
    return page.locator(f"article.entry[data-seq='{seq}']")


MICROPHONE = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
              "--autoplay-policy=no-user-gesture-required")
"""A microphone the page may use without asking, and audio that plays without a click."""


def microphone_playing(wav: Path) -> list[str]:
    """Chromium's flags for a fake microphone that plays `wav` once (read afresh each time
    a page opens the microphone), as `MICROPHONE` allows it."""
    return [*MICROPHONE, f"--use-file-for-fake-audio-capture={wav}%noloop"]


@contextmanager
def chromium(*flags: str) -> Iterator:
    """The system's Chromium, headless, launched with `flags`; closed after."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", *flags])
        try:
            yield browser
        finally:
            browser.close()


def say(page, text: str) -> None:
    """Type a message and press Enter, as the user does."""
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")

