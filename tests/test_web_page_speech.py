"""`parley web`'s voice in a real Chromium, hearing a person: the fake microphone plays
"go forward ten meters" from Debian's pocketsphinx test data, into the page and over the
WebSocket to the real speech engines (faster-whisper, Smart Turn, Piper; loaded once for
the module), with a stand-in language model whose answer is pinned.

What a user sees: Hands-free, what they said shows as their message, word for word, and
reaches Parley as the microphone recorded it (at its level), the reply's audio plays to
its end, and the status goes Listening, Thinking, Speaking, Listening; Push to talk held
across the words hears and answers them, and the same words said with nothing held are
not heard; with the wake word on, the request said after it is answered and the same
request without it is not.

The tests share one Chromium, whose fake microphone reads its recording afresh each time a
page opens it: each test writes its own. The recording plays once, in real time, so the
waits that let a part of it play are its own length, not guesses at the machine's speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile

from assistant.session import engines
from assistant.session.settings import ListeningSettings, ModelSettings, Settings, SpeechSettings
from tests.support import espeak
from tests.support import speech_samples as samples
from tests.support.browser import chromium, expect, microphone_playing, prepared
from tests.support.clips import RATE, offset_in, silence
from tests.support.clocks import HUNG_S
from tests.support.fakes import ScriptedChatModel
from tests.support.web import web_server

pytestmark = pytest.mark.real

if not samples.available():
    pytest.skip(samples.missing_reason(), allow_module_level=True)

REPLY = "All right, going forward."
SETTINGS = Settings(model=ModelSettings(no_local_intents=True))
"""Parley's own settings: Smart Turn decides when a turn has ended."""
LEAD_S, GAP_S, TAIL_S = 1.0, 2.0, 2.0
"""Silence before the first words, between two sayings, and after the last: the gap and
the tail are longer than the longest pause that ends a turn (`turn_max_silence_ms`), so
each saying would be a turn of its own if it were heard."""
WATCH = """
window.statuses = [];
window.audioFrames = 0;
window.sentSamples = [];
const Native = window.WebSocket, send = Native.prototype.send;
Native.prototype.send = function (data) {
  if (data instanceof ArrayBuffer) for (const s of new Int16Array(data)) sentSamples.push(s);
  return send.call(this, data);
};
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (m) => {
      if (typeof m.data !== "string") window.audioFrames++;
    });
  }
};
document.addEventListener("DOMContentLoaded", () => {
  const status = document.querySelector("[role=status]");
  const seen = () => {
    if (statuses[statuses.length - 1] !== status.textContent) statuses.push(status.textContent);
  };
  seen();
  new MutationObserver(seen).observe(status, { childList: true, characterData: true,
                                               subtree: true });
});
"""
"""Every text the page's status showed, in order, how many audio frames it was sent, and
the microphone's samples it sent."""


@pytest.fixture(scope="module")
def go_forward() -> samples.SpeechSample:
    return next(s for s in samples.commands() if s.name == "goforward")


@pytest.fixture(scope="module")
def speech() -> tuple:
    """The real speech engines, as `parley web` loads them by default, for every server."""
    chosen = SpeechSettings()
    return engines.load_stt(chosen), engines.load_tts(chosen)


@pytest.fixture(scope="module")
def microphone(tmp_path_factory) -> Iterator[tuple[object, Path]]:
    """One Chromium for the module, and the recording its fake microphone plays: the file
    is read afresh each time a page opens the microphone."""
    wav = tmp_path_factory.mktemp("microphone") / "microphone.wav"
    with chromium(*microphone_playing(wav)) as browser:
        yield browser, wav


@pytest.fixture
def hearing(microphone) -> Iterator[Callable[[np.ndarray], object]]:
    """Opens a page whose microphone will play `pcm` once, from when it is switched on."""
    browser, wav = microphone
    pages = []

    def opened(pcm: np.ndarray):
        soundfile.write(wav, pcm, RATE, subtype="PCM_16")
        page = prepared(browser.new_page())
        pages.append(page)
        page.add_init_script(WATCH)
        return page

    yield opened
    for page in pages:  # its microphone too: the next page's opens the file afresh
        page.close()


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    """Answers `REPLY` however often it is asked (a reply begun at a pause is dropped when
    the words go on)."""
    pinned = ScriptedChatModel()
    pinned.enqueue(*[REPLY] * 20)
    monkeypatch.setattr(engines, "load_model", lambda chosen: pinned)
    return pinned


def said(sample: samples.SpeechSample) -> np.ndarray:
    return np.concatenate([silence(LEAD_S), sample.pcm, silence(TAIL_S)])


def users(page):
    return page.locator("article.entry.user[data-seq]")


def answers(page):
    return page.locator("article.entry.assistant[data-seq]")


def played_to_the_end(page) -> None:
    """Every audio frame the page was sent played to its end, none is left playing."""
    body = page.locator("body")
    expect(body).to_have_attribute("data-audio-playing", "0")
    frames = page.evaluate("audioFrames")
    assert frames > 0
    expect(body).to_have_attribute("data-audio-played", str(frames))


def played_out(page, started: float, pcm: np.ndarray) -> None:
    """Until the microphone, switched on at `started`, has played all of `pcm`."""
    left = started + len(pcm) / RATE - time.monotonic()
    page.wait_for_timeout(max(0.0, left) * 1000)


def heard_as_recorded(page, recording: np.ndarray) -> None:
    """The page sent Parley the microphone as it recorded: found in what was sent, at its
    own level (within 3 dB; the browser's gain control made it 11.5 dB louder, and its
    noise suppression changed where Parley heard the speech end)."""
    sent = np.array(page.evaluate("sentSamples"), dtype=float)
    said = recording.astype(float)
    at = offset_in(sent, said)
    heard = sent[max(0, at):at + len(said)]
    assert len(heard) == len(said), "the page did not send the whole recording"
    level_db = 10 * np.log10(np.mean(heard ** 2) / np.mean(said ** 2))
    assert abs(level_db) < 3, f"the page sent the recording {level_db:+.1f} dB from its level"


def in_order(seen: list[str], wanted: list[str]) -> bool:
    """`wanted` appears in `seen` in this order (other states may come between)."""
    rest = iter(seen)
    return all(state in rest for state in wanted)


def test_hands_free_shows_the_words_heard_plays_the_reply_and_listens_again(
        hearing, speech, model, go_forward):
    page = hearing(said(go_forward))
    with web_server(SETTINGS, speech) as server:
        page.goto(server.page_url)
        page.get_by_role("switch", name="Hands-free").click()
        expect(answers(page)).to_contain_text(REPLY)
        assert samples.words(users(page).locator(".body").inner_text()) == go_forward.transcript
        expect(page.get_by_role("status")).to_have_text("Listening")
        played_to_the_end(page)
        heard_as_recorded(page, go_forward.pcm)
        seen = page.evaluate("statuses")
        assert in_order(seen, ["Listening", "Thinking", "Speaking", "Listening"]), seen
        assert [m.role for m in server.room.conversation.history.messages] == [
            "user", "assistant"]


def test_push_to_talk_hears_the_words_while_held_and_not_after(
        hearing, speech, model, go_forward):
    # Said twice: held across the first saying, released before the second.
    twice = np.concatenate([silence(LEAD_S), go_forward.pcm, silence(GAP_S), go_forward.pcm,
                            silence(TAIL_S)])
    page = hearing(twice)
    with web_server(SETTINGS, speech) as server:
        page.goto(server.page_url)
        status = page.get_by_role("status")
        expect(status).to_have_text("Idle")
        page.get_by_role("button", name="Push to talk").hover()
        page.mouse.down()
        expect(status).to_have_text("Listening")  # the microphone plays from about now
        started = time.monotonic()
        page.wait_for_timeout((LEAD_S + go_forward.seconds + 1.0) * 1000)
        page.mouse.up()
        released = len(page.evaluate("statuses"))
        expect(answers(page)).to_contain_text(REPLY)
        assert samples.words(users(page).locator(".body").inner_text()) == go_forward.transcript
        expect(status).to_have_text("Idle")
        played_to_the_end(page)
        # The second saying, with nothing held, plays out: it is not heard.
        played_out(page, started, twice)
        assert server.room.loop.wait_replied(HUNG_S)
        expect(users(page)).to_have_count(1)
        expect(status).to_have_text("Idle")
        assert "Listening" not in page.evaluate("statuses")[released:]
        assert len(server.room.conversation.history.messages) == 2


def test_with_the_wake_word_the_request_after_it_is_answered_and_without_it_not(
        hearing, speech, model, go_forward):
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    wake = espeak.espeak("Okay Nabu.")
    # The request alone first (nothing answered yet, so no follow-up window is open), then
    # the wake word and the same request.
    clip = np.concatenate([silence(LEAD_S), go_forward.pcm, silence(GAP_S), wake,
                           silence(0.3), go_forward.pcm, silence(TAIL_S)])
    settings = Settings(model=ModelSettings(no_local_intents=True),
                        listening=ListeningSettings(wake_word="okay_nabu"))
    page = hearing(clip)
    with web_server(settings, speech) as server:
        page.goto(server.page_url)
        switch = page.get_by_role("switch", name="Hands-free")
        switch.click()
        expect(switch).to_have_attribute("aria-checked", "true")  # the microphone plays
        played_out(page, time.monotonic(), clip)
        assert server.room.loop.wait_replied(HUNG_S)
        expect(answers(page)).to_contain_text(REPLY)
        expect(users(page)).to_have_count(1)
        assert samples.words(users(page).locator(".body").inner_text()) == go_forward.transcript
        expect(page.get_by_role("status")).to_have_text("Listening")
        played_to_the_end(page)
