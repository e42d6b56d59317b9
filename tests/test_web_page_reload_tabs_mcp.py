"""`parley web`'s page in a real Chromium: what comes back, what is shared, what asks first.

A reloaded page gets the numbered conversation and its summary back (the divider after the
last message it covers, opening to its text); two tabs of one browser both stream the reply
to a question typed in one; and a tool of a real MCP server (the tests' "notes" server,
started by Parley over stdio) that asks first shows its question with Yes and No: Yes has
the server really add the note, No leaves the notes as they were.

Chromium is the system's, driven by Playwright; without them these tests skip, saying why
(under CI a skip fails).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from assistant.mcp_client.config import ServerConfig
from assistant.session import engines
from assistant.session.settings import ModelSettings, Settings, ToolSettings
from models.base import CancelToken, Chunk, PromptMessage, TextChunk, ToolSpec
from tests.support.browser import entry, expect, prepared, say
from tests.support.clocks import HUNG_S, wait_until
from tests.support.conversations import filler
from tests.support.fakes import ScriptedChatModel, SummarizingModel
from tests.support.mcp_servers import notes_server_command, notes_server_env
from tests.support.web import scripted_model, tool_call, web_server


def test_a_reloaded_page_gets_the_conversation_and_its_summary_back(page, monkeypatch):
    model = SummarizingModel(2048)
    monkeypatch.setattr(engines, "load_model", lambda chosen: model)
    settings = Settings(model=ModelSettings(no_local_intents=True, ctx=2048, answer_tokens=256))
    with web_server(settings) as server:
        page.goto(server.page_url)
        for n in range(6):
            question, answer = filler(n)
            model.enqueue(answer)
            say(page, question)
            expect(entry(page, 2 * n + 2)).to_be_visible()
            expect(page.get_by_role("status")).to_have_text("Idle")
            assert server.room.wait_between_turns(HUNG_S)
            if server.room.conversation.summary.covered_through >= 2:
                break
        summary = server.room.conversation.summary
        assert summary.covered_through >= 2, "no summary was written"
        kept = server.room.conversation.history.messages

        page.reload()
        expect(page.get_by_role("status")).to_have_text("Idle")
        expect(page.locator("article.entry[data-seq]")).to_have_count(len(kept))
        for message in kept:
            shown = entry(page, message.seq)
            expect(shown).to_contain_text(f"#{message.seq}")
            expect(shown.locator(".body")).to_have_text(message.content)
        divider = page.locator("details.divider")
        expect(divider).to_have_count(1)
        expect(divider).to_contain_text("Summary of earlier conversation")
        before = divider.locator("xpath=preceding-sibling::article[1]")
        expect(before).to_have_attribute("data-seq", str(summary.covered_through))
        text = divider.locator("pre")
        expect(text).to_be_hidden()
        divider.locator("summary").click()
        expect(text).to_have_text(summary.text)


class HalfWritten(ScriptedChatModel):
    """Writes the first sentence of its answer, then the rest once the test lets it (`rest`).
    (The word being written, and words repeating earlier ones, may be held back: the first
    sentence is whole, repeats none of its words and ends with a space.)"""

    FIRST = "Tom sat by a warm fire. "
    REST = "Then he fell asleep."

    def __init__(self) -> None:
        super().__init__()
        self.rest = threading.Event()

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        yield TextChunk(self.FIRST)
        self.rest.wait(HUNG_S)
        yield TextChunk(self.REST)


def test_a_question_typed_in_one_tab_streams_its_reply_in_both(browser, monkeypatch):
    model = HalfWritten()
    monkeypatch.setattr(engines, "load_model", lambda chosen: model)
    context = browser.new_context()
    try:
        with web_server() as server:
            typing, watching = (prepared(context.new_page()) for _ in range(2))
            for tab in (typing, watching):
                tab.goto(server.page_url)
                expect(tab.get_by_role("status")).to_have_text("Idle")
            say(typing, "Tell me a story in two halves.")
            for tab in (typing, watching):
                expect(entry(tab, 1)).to_contain_text("Tell me a story in two halves.")
                streaming = tab.locator("article.entry.streaming .body")
                # What is written so far, in both tabs, before the rest is written.
                expect(streaming).to_have_text(HalfWritten.FIRST.strip())
            model.rest.set()
            for tab in (typing, watching):
                expect(entry(tab, 2).locator(".body")).to_have_text(
                    (HalfWritten.FIRST + HalfWritten.REST).strip())
                expect(tab.get_by_role("status")).to_have_text("Idle")
    finally:
        context.close()


def notes_server() -> Settings:
    """Settings with the tests' notes MCP server, which Parley starts over stdio."""
    command, args = notes_server_command()
    config = ServerConfig("notes", command=command, args=tuple(args), env=notes_server_env())
    return Settings(model=ModelSettings(no_local_intents=True),
                    tools=ToolSettings(mcp_servers=(config,)))


def test_an_mcp_tool_that_asks_first_runs_on_yes_and_not_on_no(page, monkeypatch):
    model = scripted_model(monkeypatch)
    model.enqueue(tool_call("notes__add_note", {"name": "todo.txt", "text": "buy milk"}),
                  "Added your note.",
                  tool_call("notes__delete_note", {"name": "shopping.txt"}), "Kept it.")
    warned: list[str] = []
    with web_server(notes_server(), warn=warned.append) as server:
        tools = server.room.conversation.tools
        wait_until(lambda: "notes__add_note" in tools.names(), "the notes server's tools")

        def notes() -> list[str]:
            return sorted(tools.call("notes__list_notes", {}).text.splitlines())

        page.goto(server.page_url)
        question = page.get_by_role("region", name="Question")
        say(page, "Note that I must buy milk.")
        expect(question).to_contain_text(
            "Shall I run add note on notes, with name todo.txt, text buy milk?")
        page.get_by_role("button", name="Yes").click()
        expect(question).to_be_hidden()
        expect(page.locator("details.step .result")).to_have_text("Added todo.txt.")
        expect(entry(page, 3)).to_contain_text("Added your note.")
        expect(page.get_by_role("status")).to_have_text("Idle")
        assert notes() == ["notes.txt", "shopping.txt", "todo.txt"]  # the server has it

        say(page, "Delete my shopping list.")
        expect(question).to_contain_text("Shall I run delete note on notes, with name "
                                         "shopping.txt?")
        page.get_by_role("button", name="No").click()
        expect(question).to_be_hidden()
        expect(page.get_by_text("Not done.")).to_be_visible()
        expect(entry(page, 6)).to_contain_text("Kept it.")
        expect(page.get_by_role("status")).to_have_text("Idle")
        assert notes() == ["notes.txt", "shopping.txt", "todo.txt"]
    assert warned == []
