"""Suite-wide rules and fixtures: under CI a skipped test is a failure; `voice` is
`parley voice` on stand-in devices (tests/support/voice_command.py); `browser` and `page`
are the system's Chromium for a module and a page in it (tests/support/browser.py).

A test skips when a tool or sample it needs is missing (PulseAudio, strace, the speech
recordings). On a developer's machine that is a fair skip, and its reason is printed at
the end of the run (`-rs`). Under CI (`CI=true`) the real tests must run, so a skip would
turn the run green with nothing real checked: it is reported as a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.voice_command import VoiceCommand, voice_command


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and under_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where it must run: {reason}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A whole module skipped while being collected never reaches the hook above.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if under_ci() and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def voice(monkeypatch) -> VoiceCommand:
    """`parley voice` with stand-in sound devices and language model; the real settings,
    conversation, segmenter, voice loop and (unless a test replaces them) speech engines."""
    return voice_command(monkeypatch)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """One Chromium for a test module; importing its support skips the test, saying why,
    when Chromium or Playwright is missing."""
    from tests.support.browser import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser) -> Iterator:
    """A new page in the module's Chromium, its expectations waiting only for a hung page."""
    from tests.support.browser import prepared

    opened = prepared(browser.new_page())
    yield opened
    opened.close()
