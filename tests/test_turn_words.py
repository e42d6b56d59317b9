"""The words heard at a pause: which cannot end a request, whatever the voice says."""

from __future__ import annotations

import pytest

from assistant.voice.turn_words import unfinished_because, whole_sentence


@pytest.mark.parametrize("text, reason", [
    ("Set a timer for", "ends on “for”"),
    ("What is the capital of", "ends on “of”"),
    ("Please add eggs, butter and", "ends on “and”"),
    ("Play something by the", "ends on “the”"),
    ("Send it to my", "ends on “my”"),
    ("What is seventeen times", "ends on “times”"),
    ("I was thinking that maybe we could.", "ends on “could”"),
    ("And so, my fellow Americans,", "trails off"),
    ("I'd like to, um...", "trails off"),
    ("So I’m", "ends on “i'm”"),
])
def test_words_a_request_does_not_end_on(text, reason):
    assert unfinished_because(text) == reason


@pytest.mark.parametrize("text", [
    "What time is it?", "Set a timer for ten minutes.", "Turn it off.", "Turn the music up",
    "What is this?", "I think so.", "Yes I can.", "What's the weather like?",
    "Down a little please.", "", "  ", "?!",
])
def test_words_that_can_end_a_request(text):
    assert unfinished_because(text) is None


@pytest.mark.parametrize("text, whole", [
    ("Tell me something about cats.", True), ("What day is it today?", True),
    ("Stop!", False), ("Set a timer for.", False), ("And so, my fellow", False),
    ("I think so...", False), ("", False), ("What is this", False),
])
def test_a_whole_sentence_ends_with_its_mark_on_a_word_a_request_can_end_on(text, whole):
    assert whole_sentence(text) is whole
