"""`parley web`'s page in a real Chromium, against the real server on a stand-in model.

What a user sees and does: a message typed and sent with Enter shows numbered, with the
reply streaming; markup in a message shows as text; a tool step shows its label and opens
to its result; a summary shows "Summarizing…" and then its divider after the last message
it covers; Yes and No answer a tool's question; Stop stops a reply; the status says
Thinking, then Idle; a timer counts down, then rings until its button stops it; every
control has an accessible name. One real test runs `parley web` itself on the embedded
model under strace, asks the time in the browser, ends it with SIGTERM and finds nothing
written to disk.

Chromium is the system's (`make` installs it) driven by Playwright; without them these
tests skip, saying why (under CI a skip fails).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence

import pytest

from assistant.session import engines
from assistant.session.settings import ModelSettings, Settings
from assistant.timer_tool import NAME as TIMER
from memory.summary import SUMMARIZER_SYSTEM
from models.base import CancelToken, Chunk, PromptMessage, ToolSpec
from tests.support.browser import entry, expect, say
from tests.support.clocks import HUNG_S, wait_until
from tests.support.conversations import filler
from tests.support.fakes import ScriptedChatModel, SummarizingModel
from tests.support.nodisk import changes_outside, guarded_env, guarded_parley, traced
from tests.support.serving import START_S, Lines, Server
from tests.support.web import EndlessModel, asking_tool, scripted_model, tool_call, web_server


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    return scripted_model(monkeypatch)


def test_a_message_sent_with_enter_shows_numbered_with_its_streamed_reply(page, model):
    go_on = threading.Event()

    def held(messages) -> str:
        go_on.wait(HUNG_S)
        return "Hello there, Sam. How are you today?"

    model.enqueue(held)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    with web_server() as server:
        page.goto(server.page_url)
        status = page.get_by_role("status")
        expect(status).to_have_text("Idle")
        say(page, "Hi, I am Sam.")
        expect(status).to_have_text("Thinking")
        expect(entry(page, 1)).to_contain_text("#1")
        expect(entry(page, 1)).to_contain_text("You")
        expect(entry(page, 1)).to_contain_text("Hi, I am Sam.")
        go_on.set()
        expect(entry(page, 2)).to_contain_text("Hello there, Sam. How are you today?")
        expect(entry(page, 2)).to_contain_text("#2")
        expect(status).to_have_text("Idle")
        expect(page.get_by_role("textbox", name="Message")).to_have_value("")

        model.enqueue("That is <b>bold</b> of you.")
        say(page, "<script>alert(1)</script>")
        expect(entry(page, 3).locator(".body")).to_have_text("<script>alert(1)</script>")
        expect(entry(page, 4).locator(".body")).to_have_text("That is <b>bold</b> of you.")
        assert page.locator("#log script, #log b").count() == 0
    assert dialogs == []


def test_a_tool_step_shows_its_label_and_opens_to_its_result(page, model):
    model.enqueue("Nice name for a cat.",
                  tool_call("conversation_history", {"query": "cat"}), "Your cat is Tom.")
    with web_server() as server:
        page.goto(server.page_url)
        say(page, "My cat is called Tom.")
        expect(entry(page, 2)).to_be_visible()
        say(page, "What is my cat called?")
        step = page.locator("details.step")
        expect(step).to_contain_text(
            "Searching earlier in this conversation for “cat”")
        expect(page.get_by_role("status")).to_have_text("Idle")
        result = step.locator(".result")
        expect(result).to_be_hidden()
        step.locator("summary").click()
        expect(result).to_be_visible()
        expect(result).to_contain_text("My cat is called Tom.")
        tool_seq = next(m.seq for m in server.room.conversation.history.messages
                        if m.role == "tool")
        expect(step).to_contain_text(f"#{tool_seq}")


class GatedSummaries(SummarizingModel):
    """Writes each summary only once the test lets it (`gate`), so the page can be seen
    while it is being written."""

    def __init__(self) -> None:
        super().__init__(2048)
        self.gate = threading.Event()
        self.summarizing = threading.Event()

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        if messages[0].content == SUMMARIZER_SYSTEM:
            self.summarizing.set()
            self.gate.wait(HUNG_S)
        yield from super().stream(messages, tools, max_tokens, cancel)


def test_a_summary_shows_while_written_then_as_a_divider_after_what_it_covers(
        page, monkeypatch):
    model = GatedSummaries()
    monkeypatch.setattr(engines, "load_model", lambda chosen: model)
    settings = Settings(model=ModelSettings(no_local_intents=True, ctx=2048, answer_tokens=256))
    with web_server(settings) as server:
        page.goto(server.page_url)
        for n in range(5):
            question, answer = filler(n)
            model.enqueue(answer)
            say(page, question)
            expect(entry(page, 2 * n + 2)).to_be_visible()
            expect(page.get_by_role("status")).to_have_text("Idle")
            wait_until(lambda: model.summarizing.is_set()
                       or server.room.wait_between_turns(0), "the work after the reply")
            if model.summarizing.is_set():
                break
        assert model.summarizing.is_set(), "no summary was begun"
        expect(page.get_by_text("Summarizing the earlier conversation…")).to_be_visible()
        model.gate.set()
        divider = page.locator("details.divider")
        expect(divider).to_contain_text("Summary of earlier conversation")
        expect(page.get_by_text("Summarizing the earlier conversation…")).to_have_count(0)
        covered = server.room.conversation.summary.covered_through
        assert covered >= 2
        before = divider.locator("xpath=preceding-sibling::article[1]")
        expect(before).to_have_attribute("data-seq", str(covered))
        text = divider.locator("pre")
        expect(text).to_be_hidden()
        divider.locator("summary").click()
        expect(text).to_contain_text("topic 0")


@pytest.mark.parametrize("button, runs, said", [("Yes", True, "Yes: running it."),
                                                ("No", False, "Not done.")])
def test_yes_and_no_buttons_answer_a_tools_question(page, model, button, runs, said):
    model.enqueue(tool_call("notes__delete_note", {"name": "a.txt"}), "As you wished.")
    ran: list[dict] = []
    with web_server() as server:
        server.room.conversation.tools.register(asking_tool(ran))
        page.goto(server.page_url)
        say(page, "Delete a.txt.")
        question = page.get_by_role("region", name="Question")
        expect(question).to_contain_text("Shall I run delete note on notes, with name a.txt?")
        page.get_by_role("button", name=button).click()
        expect(question).to_be_hidden()
        expect(page.get_by_text(said)).to_be_visible()
        expect(page.get_by_role("status")).to_have_text("Idle")
    assert ran == ([{"name": "a.txt"}] if runs else [])


def test_stop_stops_a_streaming_reply(page, monkeypatch):
    monkeypatch.setattr(engines, "load_model", lambda chosen: EndlessModel())
    with web_server() as server:
        page.goto(server.page_url)
        stop = page.get_by_role("button", name="Stop")
        expect(stop).to_be_disabled()
        say(page, "Tell me everything.")
        streaming = page.locator("article.entry.streaming .body")
        expect(streaming).to_contain_text("detaaa")
        stop.click()
        expect(page.get_by_text("Stopped.")).to_be_visible()
        expect(page.get_by_role("status")).to_have_text("Idle")
        expect(stop).to_be_disabled()
        kept = server.room.conversation.history.messages[-1].content
        expect(entry(page, 2).locator(".body")).to_have_text(kept)


def test_every_control_has_an_accessible_name(page, model):
    with web_server() as server:
        page.goto(server.page_url)
        for role, name in (("textbox", "Message"), ("button", "Send"), ("button", "Stop"),
                           ("switch", "Hands-free"), ("button", "Push to talk"),
                           ("main", "Conversation"), ("status", None)):
            found = page.get_by_role(role, name=name) if name else page.get_by_role(role)
            expect(found).to_have_count(1)
        assert page.title() == "Parley"


def test_a_timer_counts_down_then_rings_until_its_button_stops_it(page, model):
    model.enqueue(tool_call(TIMER, {"action": "start", "seconds": 5, "name": "tea"}),
                  "Your tea timer is set.")
    with web_server() as server:
        page.goto(server.page_url)
        say(page, "Set a tea timer for 5 seconds.")
        timers = page.get_by_role("region", name="Timers", exact=True)
        expect(timers).to_contain_text("5 second tea timer")
        expect(timers).to_contain_text(re.compile(r"0:0[1-3] left"))  # counting down
        ring = page.get_by_role("alert")
        expect(ring).to_contain_text("Your 5 second tea timer is done.")
        expect(timers).to_have_text("")
        page.get_by_role("button", name="Stop the ringing").click()
        expect(ring).to_have_count(0)


@pytest.mark.real
def test_parley_web_on_the_embedded_model_answers_in_the_browser_and_stops_on_sigterm(
        page, tmp_path):
    # Under strace and the audit hook: serving a conversation writes nothing to disk.
    log = tmp_path / "trace"
    process = subprocess.Popen(traced(guarded_parley(["web", "--uri", "http://127.0.0.1:0"]),
                                      log),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=guarded_env(tmp_path))
    assert process.stdout is not None and process.stderr is not None
    server = Server(process, "127.0.0.1", 0, Lines(process.stdout), Lines(process.stderr))
    try:
        ready = server.stdout.wait_for(re.compile(r"^Parley is at (http://127\.0\.0\.1:(\d+)/"
                                                  r"\?token=[\w-]+)$"), START_S)
        assert ready is not None, f"no address printed:\n{server.output()}"
        assert int(ready.group(2)) != 0  # the real port, not the 0 asked for
        page.goto(ready.group(1))
        say(page, "What time is it?")
        answer = page.locator("article.entry.assistant[data-seq]")
        expect(answer).to_contain_text(re.compile(r"\b\d{1,2}:\d{2}\b"))
        expect(page.get_by_role("status")).to_have_text("Idle")
        os.kill(server.parley_pid(), signal.SIGTERM)
        # The next prompt being read ahead stops between two of llama.cpp's batches.
        assert process.wait(timeout=START_S) == 0, server.output()
    finally:
        if process.poll() is None:
            server.kill()
    assert server.stdout.text().splitlines() == [ready.group(0)]  # the one line
    assert changes_outside(log, [tmp_path]) == []


@pytest.mark.real
def test_open_hands_the_printed_address_to_the_desktops_browser(tmp_path):
    """`--open`: the browser the desktop names (`BROWSER`, as Python's webbrowser reads it)
    is given the very address printed, token included; Ctrl-C ends it with exit code 0."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    process = subprocess.Popen(
        guarded_parley(["web", "--uri", "http://127.0.0.1:0", "--open"]),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=guarded_env(tmp_path, BROWSER=f"{browser} %s"))
    assert process.stdout is not None and process.stderr is not None
    server = Server(process, "127.0.0.1", 0, Lines(process.stdout), Lines(process.stderr))
    try:
        ready = server.stdout.wait_for(re.compile(r"^Parley is at (http://\S+)$"), START_S)
        assert ready is not None, f"no address printed:\n{server.output()}"
        wait_until(lambda: opened.exists() and opened.read_text().strip(), "the browser opened")
        assert opened.read_text().strip() == ready.group(1)
        os.kill(server.parley_pid(), signal.SIGINT)  # Ctrl-C ends it as SIGTERM does
        assert process.wait(timeout=START_S) == 0, server.output()
    finally:
        if process.poll() is None:
            server.kill()


def test_a_cut_reply_and_a_model_error_are_said_in_lines_and_the_talk_goes_on(page, model):
    from models.errors import EngineError

    model.enqueue("Paris is lovely.<|im_start|>user\nAnd Rome?",
                  EngineError("the language model stopped: out of memory"), "Rome too.")
    with web_server() as server:
        page.goto(server.page_url)
        status = page.get_by_role("status")
        say(page, "Tell me about Paris.")
        expect(entry(page, 2)).to_contain_text("Paris is lovely.")
        expect(page.locator("#log")).to_contain_text(
            "The reply was cut short: it began to write the model's own markup.")
        expect(entry(page, 2)).not_to_contain_text("im_start")
        expect(status).to_have_text("Idle")
        say(page, "And Rome?")
        expect(page.locator("#log")).to_contain_text("out of memory")
        expect(status).to_have_text("Idle")
        say(page, "Rome, then?")
        expect(page.locator("#log")).to_contain_text("Rome too.")
        kept = [m["text"] for m in server.conversation()["messages"] if m["role"] == "user"]
        assert kept[0] == "Tell me about Paris." and kept[-1] == "Rome, then?"


def test_a_fact_out_of_the_prompt_is_recalled_in_a_line(page, monkeypatch):
    """Once a summary covers where the car was parked, asking about it puts that message
    beside the question, and the page says which one in a line."""
    model = SummarizingModel(2048)
    monkeypatch.setattr(engines, "load_model", lambda chosen: model)
    settings = Settings(model=ModelSettings(no_local_intents=True, ctx=2048, answer_tokens=256))
    talk = [("I parked the car on level 3, spot 42. " + "words " * 190, "Noted.")]
    talk += [filler(n) for n in range(5)]
    with web_server(settings) as server:
        page.goto(server.page_url)
        for seq, (question, answer) in enumerate(talk, start=1):
            model.enqueue(answer)
            say(page, question)
            expect(entry(page, 2 * seq)).to_be_visible()
            expect(page.get_by_role("status")).to_have_text("Idle")
            assert server.room.wait_between_turns(HUNG_S)
            if server.room.conversation.summary.covered_through >= 2:
                break
        assert server.room.conversation.summary.covered_through >= 2, "no summary covered it"
        model.enqueue("Level 3.")
        say(page, "Which level did I park the car on?")
        expect(page.locator("#log")).to_contain_text(
            "Recalling message #1 from earlier in this conversation")
        expect(page.locator("#log")).to_contain_text("Level 3.")
