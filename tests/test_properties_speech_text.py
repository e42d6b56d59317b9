"""Property tests for the text Parley hands to the voice: long sentences in pieces.

Whatever the sentence, its pieces say every word in order, each piece has at most the
limit's words, and a clause that fits stays whole.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from models.pieces import speech_pieces

PROPERTY = settings(max_examples=200, deadline=None, database=None)
WORD = st.text(st.characters(codec="utf-8", exclude_categories=("Z", "C")), min_size=1,
               max_size=8)
MARK = st.sampled_from(["", "", "", ",", ";", ":", " —", "."])


@pytest.fixture(scope="module", autouse=True)
def hypothesis_storage(tmp_path_factory):
    """Hypothesis keeps its caches under pytest's temporary folder, not the repository."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


@PROPERTY
@given(st.lists(st.tuples(WORD, MARK), max_size=60), st.integers(1, 20))
def test_pieces_keep_every_word_in_order_within_the_limit(words, limit):
    text = " ".join(word + mark for word, mark in words)
    pieces = speech_pieces(text, limit)
    assert " ".join(pieces).split() == text.split()
    assert all(1 <= len(piece.split()) <= limit for piece in pieces)


def test_a_long_sentence_is_cut_at_its_clauses_and_a_short_one_is_not():
    sentence = ("The sea is a vast body of salt water that covers most of the surface of our "
                "planet, and it is home to countless creatures, large and small, from whales "
                "to plankton.")
    assert speech_pieces(sentence, 12) == [
        "The sea is a vast body of salt water",
        "that covers most of the surface of our planet,",
        "and it is home to countless creatures, large and small,",
        "from whales to plankton.",
    ]
    assert speech_pieces("It is ten past four, on Saturday.", 12) == [
        "It is ten past four, on Saturday."]
    with pytest.raises(ValueError):
        speech_pieces("hello", 0)
