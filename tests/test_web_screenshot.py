"""The README's picture of `parley web`'s page, docs/web-page.png, taken by the tests' browser.

`PARLEY_UPDATE_SCREENSHOT=1` takes it again: a conversation resumed with its summary (the
divider after the messages it covers, opened), then two questions typed in the page, one answered
through a tool step, one setting a timer that counts down. Without it, the test only checks
that the picture is there, a PNG of the page's size and small enough for the repository:
the suite never writes into the repository.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from assistant.session import engines
from assistant.timer_tool import NAME as TIMER
from memory.summary import RunningSummary
from tests.support.fakes import ScriptedChatModel
from tests.support.web import tool_call, web_server

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "web-page.png"
VIEWPORT = {"width": 1000, "height": 700}
MAX_BYTES = 150_000

EARLIER = [
    ("user", "I'm cooking dinner for six on Saturday, and two of them are vegetarian."),
    ("assistant", "A mushroom risotto would suit everyone, with a green salad on the side."),
    ("user", "Good idea. I'll buy arborio rice, mushrooms and parmesan."),
    ("assistant", "Add an onion, a glass of white wine and vegetable stock, and you have "
                  "the whole risotto."),
]
SUMMARY = ("- (#1–#2) Dinner for six on Saturday, two of them vegetarian: a mushroom risotto "
           "with a green salad.",
           "- (#3–#4) To buy: arborio rice, mushrooms, parmesan, an onion, white wine and "
           "vegetable stock.")


def test_the_readme_screenshot_is_a_small_png_of_the_page(monkeypatch):
    if os.environ.get("PARLEY_UPDATE_SCREENSHOT") == "1":
        take_screenshot(monkeypatch)
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{SCREENSHOT} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"])
    assert 10_000 < len(data) <= MAX_BYTES, f"{SCREENSHOT} is {len(data):,} bytes"


def take_screenshot(monkeypatch) -> None:
    from tests.support.browser import chromium, expect, prepared, say

    model = ScriptedChatModel()
    monkeypatch.setattr(engines, "load_model", lambda chosen: model)
    model.enqueue(tool_call("conversation_history", {"query": "dinner guests"}),
                  "Six, on Saturday, and two of them are vegetarian: the mushroom risotto "
                  "suits them all.",
                  # The timer's own sentence ends the reply (assistant.tool_offers).
                  tool_call(TIMER, {"action": "start", "seconds": 18 * 60, "name": "risotto"}))
    with web_server() as server, chromium() as browser:
        conversation = server.room.conversation
        for role, text in EARLIER:  # as `--resume` brings a saved conversation back
            conversation.history.add(role, text)
        conversation.state.set_summary(RunningSummary(SUMMARY, covered_through=4))
        page = prepared(browser.new_page(viewport=VIEWPORT))
        page.goto(server.page_url)
        status = page.get_by_role("status")
        answers = page.locator("article.entry.assistant[data-seq]")
        for asked, question in enumerate(("How many are coming to dinner again?",
                                          "Set a timer for 18 minutes for the risotto.")):
            say(page, question)
            expect(answers).to_have_count(len(EARLIER) // 2 + asked + 1)
            expect(status).to_have_text("Idle")
        divider = page.locator("details.divider")
        divider.locator("summary").click()  # open, to show the summary's text
        expect(divider.locator("pre")).to_contain_text("To buy: arborio rice")
        expect(page.locator("details.step").first).to_contain_text(
            "Searching earlier in this conversation for “dinner guests”")
        expect(page.get_by_role("region", name="Timers", exact=True)).to_contain_text(
            "risotto timer")
        page.get_by_role("textbox", name="Message").blur()
        page.screenshot(path=str(SCREENSHOT))
