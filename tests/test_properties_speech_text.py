"""Property tests for the text Parley hands to the voice: long sentences in pieces.

Whatever the sentence, its pieces say every word in order, each piece has at most the
limit's words, and a clause that fits stays whole.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from models.pieces import phoneme_runs, speech_pieces

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


PHONEME = st.sampled_from(list("ðəkˈæpɪɾlʌvfɹnsz,.") + [" ", " ", " "])


@PROPERTY
@given(st.lists(PHONEME, max_size=400), st.integers(1, 120))
def test_phoneme_runs_keep_every_phoneme_in_order_within_the_limit(phonemes, limit):
    runs = phoneme_runs(phonemes, limit)
    assert all(1 <= len(run) <= limit for run in runs)
    # Only a word-separating space may go, at a cut; nothing else is lost or moved.
    assert [p for run in runs for p in run if p != " "] == [p for p in phonemes if p != " "]
    if len(phonemes) <= limit and phonemes:
        assert runs == [phonemes]


def test_phoneme_runs_cut_between_words_where_a_word_fits():
    assert phoneme_runs(list("ab cd ef gh"), 5) == [list("ab cd"), list("ef gh")]
    assert phoneme_runs(list("abcdefg hi"), 3) == [list("abc"), list("def"), list("g"),
                                                   list("hi")]


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
