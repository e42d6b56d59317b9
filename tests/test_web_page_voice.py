"""`parley web`'s voice in a real Chromium: its fake microphone plays a WAV of a spoken
question (espeak-ng), into the page's AudioWorklet and over the WebSocket to the server.

What a user sees and does: switching Hands-free on, the question is heard and shown as
their message, and the reply is answered and played; Push to talk (the space bar) hears
what is said while it is held; Stop silences the reply; a refused microphone, or a page
that is not a secure context, is said in words, the voice controls are off and typed chat
works. One real test
runs `parley web` on the embedded engines (under the audit hook that fails a write to
disk) and asks it the time aloud.

Chromium is the system's, driven by Playwright; without them (or espeak-ng) these tests
skip, saying why.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
import soundfile

from assistant.session.settings import ListeningSettings, ModelSettings, Settings
from tests.support import espeak
from tests.support.browser import MICROPHONE, chromium, entry, expect, microphone_playing, prepared
from tests.support.clips import RATE, silence
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech
from tests.support.nodisk import guarded_env, guarded_parley
from tests.support.serving import START_S, Lines, Server
from tests.support.web import scripted_model, web_server

if espeak.missing_reason():
    pytest.skip(espeak.missing_reason() or "", allow_module_level=True)

QUESTION = "What is the capital of France?"
SETTINGS = Settings(model=ModelSettings(no_local_intents=True),
                    listening=ListeningSettings(end_of_turn="silence"))
FAKE_MICROPHONE = [flag for flag in MICROPHONE if flag != "--use-fake-ui-for-media-stream"]
"""A microphone the page must ask for: the permission prompt is refused."""


def spoken_wav(folder: Path, text: str) -> Path:
    """`text` said by espeak-ng, between silences, as a 16 kHz mono int16 WAV."""
    pcm = np.concatenate([silence(0.8), espeak.espeak(text), silence(2.5)])
    path = folder / "question.wav"
    soundfile.write(path, pcm, RATE, subtype="PCM_16")
    return path


@pytest.fixture
def open_page(tmp_path) -> Iterator[Callable[..., object]]:
    """Opens a page in a Chromium launched with `args` (each call its own browser)."""
    with ExitStack() as browsers:

        def opened(*args: str):
            return prepared(browsers.enter_context(chromium(*args)).new_page())

        yield opened


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    return scripted_model(monkeypatch)


def hears_the_question() -> ScriptedSpeechToText:
    """Hears the question in anything loud enough to be speech."""
    return ScriptedSpeechToText({10000: QUESTION})


def test_hands_free_hears_the_question_and_plays_the_reply(open_page, model, tmp_path):
    # As often as asked: a reply begun at a pause in the question is dropped when it goes on.
    model.enqueue(*["Paris is the capital of France."] * 4)
    wav = spoken_wav(tmp_path, QUESTION)
    page = open_page(*microphone_playing(wav))
    with web_server(SETTINGS, (hears_the_question(), ToneTextToSpeech(20))) as server:
        page.goto(server.page_url)
        switch = page.get_by_role("switch", name="Hands-free")
        expect(switch).to_have_attribute("aria-checked", "false")
        switch.click()
        expect(switch).to_have_attribute("aria-checked", "true")
        expect(entry(page, 1)).to_contain_text(QUESTION)
        expect(entry(page, 1)).to_contain_text("You")
        expect(entry(page, 2)).to_contain_text("Paris is the capital of France.")
        expect(page.locator("body")).to_have_attribute("data-audio-played", re.compile(r"\d"))
        expect(page.get_by_role("status")).to_have_text("Listening")  # still hands-free
        assert page.locator("article.entry").count() == 2  # each message shown once


def test_the_space_bar_talks_while_it_is_held(open_page, model, tmp_path):
    model.enqueue(*["Paris."] * 4)
    wav = spoken_wav(tmp_path, QUESTION)
    page = open_page(*microphone_playing(wav))
    with web_server(SETTINGS, (hears_the_question(), ToneTextToSpeech(20))) as server:
        page.goto(server.page_url)
        status = page.get_by_role("status")
        expect(status).to_have_text("Idle")
        page.get_by_role("heading", name="Parley").click()  # away from the text box
        page.keyboard.down("Space")
        expect(status).to_have_text("Listening")
        expect(page.get_by_role("button", name="Push to talk")).to_have_class(
            re.compile(r"\bheld\b"))
        page.wait_for_timeout(3500)  # the question is said meanwhile
        page.keyboard.up("Space")
        expect(entry(page, 1)).to_contain_text(QUESTION)
        expect(entry(page, 2)).to_contain_text("Paris.")
        expect(status).to_have_text("Idle")


def test_stop_silences_the_reply_in_the_page_at_once(open_page, model):
    model.enqueue("Once upon a time a fox lived by the river, and every morning she walked "
                  "down to the old mill to watch the boats go by.")
    page = open_page(*FAKE_MICROPHONE)
    with web_server(SETTINGS, (hears_the_question(), ToneTextToSpeech(50))) as server:
        page.goto(server.page_url)
        box = page.get_by_role("textbox", name="Message")
        box.fill("Tell me a story.")
        box.press("Enter")  # a press: the page may play sound from now
        status = page.get_by_role("status")
        expect(status).to_have_text("Speaking")
        body = page.locator("body")
        expect(body).to_have_attribute("data-audio-playing", re.compile(r"^[1-9]"))
        page.get_by_role("button", name="Stop").click()
        expect(body).to_have_attribute("data-audio-playing", "0")
        expect(status).to_have_text("Idle")
        expect(page.get_by_text("Stopped speaking.")).to_be_visible()


def test_a_refused_microphone_is_said_and_typed_chat_works(open_page, model):
    model.enqueue("Typed and answered.")
    # Without the flag that allows it, headless Chromium refuses the microphone.
    page = open_page(*FAKE_MICROPHONE)
    with web_server(SETTINGS) as server:
        page.goto(server.page_url)
        switch = page.get_by_role("switch", name="Hands-free")
        switch.click()
        note = page.get_by_text("The microphone was refused")
        expect(note).to_be_visible()
        expect(switch).to_be_disabled()
        expect(switch).to_have_attribute("aria-checked", "false")
        expect(page.get_by_role("button", name="Push to talk")).to_be_disabled()
        box = page.get_by_role("textbox", name="Message")
        box.fill("Are you there?")
        box.press("Enter")
        expect(entry(page, 2)).to_contain_text("Typed and answered.")


def test_a_page_that_is_not_a_secure_context_says_so_and_typed_chat_works(open_page, model):
    model.enqueue("Typed and answered.")
    page = open_page(*FAKE_MICROPHONE)
    # As the page is at another address than this machine's, over plain HTTP.
    page.add_init_script("Object.defineProperty(window, 'isSecureContext', {value: false})")
    with web_server(SETTINGS) as server:
        page.goto(server.page_url)
        expect(page.get_by_text("Voice needs a secure page")).to_be_visible()
        expect(page.get_by_role("switch", name="Hands-free")).to_be_disabled()
        expect(page.get_by_role("button", name="Push to talk")).to_be_disabled()
        box = page.get_by_role("textbox", name="Message")
        box.fill("Are you there?")
        box.press("Enter")
        expect(entry(page, 2)).to_contain_text("Typed and answered.")


@pytest.mark.real
def test_parley_web_on_the_embedded_engines_hears_and_answers_a_spoken_question(
        open_page, tmp_path):
    wav = spoken_wav(tmp_path, "What time is it?")
    # Under the audit hook: a write outside tmp_path fails the process.
    process = subprocess.Popen(guarded_parley(["web", "--uri", "http://127.0.0.1:0"]),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=guarded_env(tmp_path))
    assert process.stdout is not None and process.stderr is not None
    server = Server(process, "127.0.0.1", 0, Lines(process.stdout), Lines(process.stderr))
    try:
        ready = server.stdout.wait_for(re.compile(r"^Parley is at (http://127\.0\.0\.1:\d+/"
                                                  r"\?token=[\w-]+)$"), START_S)
        assert ready is not None, f"no address printed:\n{server.output()}"
        page = open_page(*microphone_playing(wav))
        page.goto(ready.group(1))
        page.get_by_role("switch", name="Hands-free").click()
        question = page.locator("article.entry.user[data-seq]")
        expect(question).to_contain_text(re.compile(r"what time", re.IGNORECASE))
        answer = page.locator("article.entry.assistant[data-seq]")
        expect(answer).to_contain_text(re.compile(r"\b\d{1,2}:\d{2}\b"))
        expect(page.locator("body")).to_have_attribute("data-audio-played", re.compile(r"\d"))
        os.kill(server.parley_pid(), signal.SIGTERM)
        assert process.wait(timeout=START_S) == 0, server.output()
    finally:
        if process.poll() is None:
            server.kill()
    assert "Voice is off" not in server.stderr.text()
