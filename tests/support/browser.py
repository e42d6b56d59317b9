"""The page's tests in the system's Chromium, driven by Playwright: importing this skips
the test module, saying why, when either is missing (under CI a skip fails)."""

from __future__ import annotations

import shutil

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
