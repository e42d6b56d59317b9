"""The look-back search from cold: what it finds, how it ranks, and when things were said."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import Message, read_message, search_history
from memory.history import History
from memory.ranking import is_question
from memory.scan import WINDOW_CHARS, WINDOW_STEP, Corpus, match_weight, query_terms, words
from memory.search import HistorySearch
from memory.when import days_asked

NOW = datetime.fromisoformat("2026-12-05T18:00:00+01:00")


def said(seq: int, role: str, content: str, at: str) -> Message:
    return Message(seq, role, content, at=datetime.fromisoformat(at))


def top(messages, query: str, now: datetime = NOW) -> list[int]:
    return [places[0].seq for places in HistorySearch(messages, now=now).places(query)]


# -- scanning finds exactly what tokenizing and stemming every word would ----------------

_VOCABULARY = ["bill", "billing", "bills", "billed", "city", "cities", "port", "ports",
               "support", "report", "billing_api", "v2.1", "v2.10", "relational", "relate",
               "happy", "happiness", "Port", "BILLING", "über", "İstanbul", "x", "go"]


def reference_hits(messages, word: str) -> dict[int, dict[int, float]]:
    """Each window's occurrences of the word, by tokenizing every window: a plain word is
    matched against every word part, an identifier against whole identifiers."""
    term = next(t for t in query_terms(word) if t.word == word)
    pattern = r"[^\W_]+" if word.isalnum() else r"[^\W_]+(?:[_.'-][^\W_]+)*"
    found: dict[int, dict[int, float]] = {}
    for position, message in enumerate(messages):
        text = message.content.lower()
        starts = range(0, max(len(text) - WINDOW_STEP, 1), WINDOW_STEP)
        for number, start in enumerate(starts):
            total = sum(match_weight(m.group(), term) for m in re.finditer(pattern, text)
                        if start <= m.start() < start + WINDOW_CHARS)
            if total:
                found.setdefault(position, {})[number] = total
    return found


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_VOCABULARY + ["filler"] * 6), max_size=260),
                min_size=1, max_size=4),
       st.sampled_from(["billing", "cities", "ports", "v2.1", "billing_api", "relational",
                        "happy", "go"]))
def test_scanning_finds_the_windows_a_full_tokenizer_would(bodies, word):
    messages = [Message(n, "user", " ".join(body)) for n, body in enumerate(bodies, start=1)]
    term = next(t for t in query_terms(word) if t.word == word)
    found = {owner: {n: round(w, 9) for n, w in windows.items()}
             for owner, windows in Corpus(messages).hits(term).items()}
    expected = {owner: {n: round(w, 9) for n, w in windows.items()}
                for owner, windows in reference_hits(messages, word).items()}
    assert found == expected


def test_words_keep_identifiers_whole_and_by_their_parts():
    assert words("Port billing_api v2.1") == ["port", "billing", "billing_api", "api",
                                              "v2", "v2.1", "1"]


# -- ranking: who said it, when, and what it answered ------------------------------------

LUNCH = [
    said(1, "user", "My knee has been aching since the hike on Sunday.", "2026-11-02T09:00+01:00"),
    said(2, "assistant", "Rest it for a few days, put ice on it twenty minutes at a time, "
                         "and see a physiotherapist if it still hurts next week.",
         "2026-11-02T09:01+01:00"),
    said(3, "user", "The knee brace I ordered arrived today.", "2026-11-20T10:00+01:00"),
    said(4, "assistant", "Good, wear it on longer walks.", "2026-11-20T10:01+01:00"),
    said(5, "user", "We booked the restaurant Lisboa for Anna's birthday.",
         "2026-12-03T19:00+01:00"),
    said(6, "assistant", "Lovely, I hope the evening goes well.", "2026-12-03T19:01+01:00"),
]


def test_what_parley_advised_ranks_its_reply_beside_the_message_it_answered():
    # The advice shares no word with the question; the message it answered does. Without
    # its side asked, the user's own messages about the knee come first.
    assert 2 in top(LUNCH, "What did you recommend for my knee?")
    assert 2 not in top(LUNCH, "knee")


def test_what_the_user_said_prefers_the_users_own_messages():
    assert top(LUNCH, "What did I tell you about the knee brace?")[0] == 3


def test_a_day_named_in_the_question_finds_what_was_said_that_day():
    # No word of the question is in message 5; only its day is.
    assert top(LUNCH, "What did we plan on 3 December?")[0] == 5
    assert top(LUNCH, "what did I say on Thursday")[0] == 5  # 3 December 2026 is a Thursday


def test_results_say_when_each_message_was_said_and_reading_does_too():
    shown = HistorySearch(LUNCH, now=NOW).search("knee brace")
    assert "#3 (user, Fri 20 Nov 10:00): The knee brace I ordered arrived today." in shown
    page = read_message(LUNCH, 5)
    assert page.startswith("#5 (user, Thu 3 Dec 19:00), characters 0–")


def test_messages_from_another_year_show_the_year():
    old = [said(1, "user", "The billing port is 8101.", "2025-03-02T09:00+01:00")]
    assert "#1 (user, Sun 2 Mar 2025 09:00)" in search_history(old, "billing port")


def test_history_records_when_each_message_was_said():
    times = iter([NOW, NOW + timedelta(minutes=3)])
    history = History(now=lambda: next(times))
    history.add("user", "hello")
    history.add("assistant", "hi")
    assert [m.at for m in history.messages] == [NOW, NOW + timedelta(minutes=3)]
    history.replace_content(2, "hi there")
    assert history.messages[1].at == NOW + timedelta(minutes=3)  # an edit keeps its time


def test_days_a_question_names():
    today = date(2026, 12, 5)  # a Saturday
    asked = {q: days_asked(q, NOW) for q in (
        "what did we discuss on 3 March", "March 3rd, 2025", "2026-11-30", "yesterday",
        "the day before yesterday", "last Saturday", "on Tuesday", "last week",
        "two weeks ago", "in May", "When did I mention the dentist?")}
    assert asked["what did we discuss on 3 March"] == [(date(2026, 3, 3), date(2026, 3, 3))]
    assert asked["March 3rd, 2025"] == [(date(2025, 3, 3), date(2025, 3, 3))]
    assert asked["2026-11-30"] == [(date(2026, 11, 30), date(2026, 11, 30))]
    assert asked["yesterday"] == [(today - timedelta(days=1),) * 2]
    assert asked["the day before yesterday"] == [(today - timedelta(days=2),) * 2]
    assert asked["last Saturday"] == [(date(2026, 11, 28),) * 2]
    assert asked["on Tuesday"] == [(date(2026, 12, 1),) * 2]
    assert asked["last week"] == [(date(2026, 11, 23), date(2026, 11, 29))]
    assert asked["two weeks ago"] == [(date(2026, 11, 18), date(2026, 11, 24))]
    assert asked["in May"] == [(date(2026, 5, 1), date(2026, 5, 31))]
    assert asked["When did I mention the dentist?"] == []
    # A day and month still to come this year is last year's.
    assert days_asked("on 24 December", NOW) == [(date(2025, 12, 24),) * 2]


def test_the_model_is_told_the_date_and_the_prompt_stays_the_same_all_day():
    from assistant.prompt import PromptBuilder
    from memory.search import SearchIndexCache
    from memory.summary import RunningSummary
    from tests.support.fakes import ScriptedChatModel

    def system_at(moment: str) -> str:
        builder = PromptBuilder(ScriptedChatModel(), "You are Parley.", 64, True,
                                SearchIndexCache(), now=lambda: datetime.fromisoformat(moment))
        return builder.system_message([], RunningSummary(), LUNCH).content

    morning = system_at("2026-12-05T08:00:00+01:00")
    assert "Today is Saturday, 5 December 2026." in morning
    assert system_at("2026-12-05T23:59:00+01:00") == morning  # llama.cpp reuses it all day
    assert "Sunday, 6 December" in system_at("2026-12-06T00:01:00+01:00")


@pytest.mark.parametrize("text", ["What is the capital of France?", "how many legs does a "
                                  "spider have", "Do you remember my name", "  Where's my car"])
def test_questions_are_told_from_statements(text):
    assert is_question(text)


@pytest.mark.parametrize("text", ["I parked on level 3.", "My name is Sam.",
                                  "Whatever you think is fine.", "Howard called me."])
def test_statements_are_not_questions(text):
    assert not is_question(text)
