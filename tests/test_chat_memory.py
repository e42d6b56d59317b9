"""Long conversations: the running summary and the conversation_history tool ."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assistant import history_tool
from assistant.conversation import Conversation, ReplySettings
from assistant.events import (
    RecallHint,
    ReplyDone,
    Summarized,
    SummaryFailed,
    SummaryStarted,
    ToolCall,
    ToolResult,
)
from assistant.tools import ToolRegistry, builtin_tools
from memory import Message, read_message, search_history
from memory.history import group_exchanges
from memory.search import OUTPUT_CHARS, PAGE_CHARS
from memory.summary import (
    SUMMARY_CHARS,
    RunningSummary,
    SummaryPlan,
    accept_bullets,
    append_bullets,
    fallback_bullet,
    plan_summary,
    summary_request,
)
from models.base import CancelToken
from models.errors import EngineError
from tests.support.conversations import chat, filler, summarizing_conversation
from tests.support.fakes import SummarizingModel

BILLING = "  billing:\n    image: billing:2.1\n    ports:\n      - '8101:8101'\n"


def compose_file(services: int = 40) -> str:
    """A realistic long paste with the billing block deep inside it."""
    blocks = [f"  svc{i}:\n    image: registry.local/app{i}:1.{i}\n    ports:\n"
              f"      - '{9000 + i}:80'\n    restart: always\n" for i in range(services)]
    blocks.insert(services * 2 // 3, BILLING)
    return "services:\n" + "".join(blocks)


# -- the history tool ------------------------------------------------------------------

def paste_conversation() -> list[Message]:
    return [
        Message(1, "user", "Here is our compose file:\n" + compose_file(50)),
        Message(2, "assistant", "Thanks, I have read the compose file."),
        Message(3, "user", "We decided to deploy on Fridays."),
        Message(4, "tool", "2026-12-04 is a Friday", tool="clock", query="next friday"),
        Message(5, "assistant", "Noted: deployments on Fridays."),
    ]


def test_search_finds_a_passage_deep_inside_a_long_paste():
    messages = paste_conversation()
    result = search_history(messages, "billing port")
    assert result.startswith("Earlier in this conversation")
    assert "#1 (user, characters" in result and "8101:8101" in result
    assert len(result) <= OUTPUT_CHARS


def test_read_message_returns_the_exact_text_by_range_and_pages_to_the_end():
    messages = paste_conversation()
    paste = messages[0].content
    assert len(paste) > PAGE_CHARS
    pages, offset = [], 0
    while True:
        page = read_message(messages, 1, offset)
        body = page.split("\n", 1)[1].rsplit("\n", 1)[0]
        pages.append(body)
        found = re.search(r'"offset": (\d+)', page)
        if not found:
            assert page.endswith("[end of message]")
            break
        offset = int(found.group(1))
    assert "".join(pages) == paste
    start = paste.index("  billing:")
    assert read_message(messages, 1, start).split("\n", 2)[1] == "  billing:"


def test_results_are_bounded_numbered_by_seq_and_see_only_what_was_handed_in():
    messages = [Message(seq, "user", f"note {seq}: the launch code is alpha{seq} " * 200)
                for seq in (7, 9, 12)]
    result = search_history(messages, "launch code alpha9")
    assert len(result) <= OUTPUT_CHARS
    labels = set(re.findall(r"^#(\d+) ", result, re.MULTILINE))
    assert labels <= {"7", "9", "12"} and "9" in labels
    other_conversation = [Message(1, "user", "the launch code is alpha9")]
    assert "#9" not in search_history(other_conversation, "launch code alpha9")
    assert "no earlier message #9" in read_message(other_conversation, 9)


def test_tool_results_are_searchable_by_their_query():
    result = search_history(paste_conversation(), "next friday")
    assert "#4 (clock result for “next friday”)" in result


def test_a_shared_stem_matches_and_rarer_words_weigh_more():
    messages = [Message(1, "user", "We talked about deployment windows."),
                Message(2, "user", "The the the and deploy of things"),
                Message(3, "user", "Nothing relevant here at all.")]
    result = search_history(messages, "deploying")
    assert "#1 " in result and "#2 " in result and "#3 " not in result
    assert "Nothing earlier in this conversation matches" in search_history(messages, "zebra")


def test_history_tool_reads_and_searches_through_its_arguments():
    from memory.search import HistorySearch

    tool = history_tool.history_tool(HistorySearch(paste_conversation()))
    assert "8101" in tool.run({"query": "billing"}).text
    assert tool.run({"message": 3}).text.split("\n")[1] == "We decided to deploy on Fridays."
    assert tool.label({"query": "billing port"}) == \
        "Searching earlier in this conversation for “billing port”"
    refused = ToolRegistry([tool]).call(history_tool.NAME, {})
    assert refused.is_error and refused.text.startswith("Error:")


# -- planning and the summarizer request -----------------------------------------------

def numbered(*turns: tuple[str, str]) -> list[Message]:
    messages: list[Message] = []
    for question, answer in turns:
        messages.append(Message(len(messages) + 1, "user", question))
        messages.append(Message(len(messages) + 1, "assistant", answer))
    return messages


def count(message: Message) -> int:
    return 4 + len(message.content) // 4


def test_plan_covers_nothing_while_the_text_fits():
    messages = numbered(*(filler(n) for n in range(4)))
    total = sum(count(m) for m in messages)
    assert plan_summary(messages, RunningSummary(), messages[-1].seq, count,
                        room=total + 50, summary_tokens=0) is None


def test_plan_covers_the_oldest_exchanges_at_a_boundary_with_half_the_room_free():
    messages = numbered(*(filler(n) for n in range(10)))
    messages.append(Message(21, "user", "and now?"))
    room = 1500
    plan = plan_summary(messages, RunningSummary(), 21, count, room, summary_tokens=0)
    assert plan is not None and plan.first_seq == 1
    assert all(e.messages[0].role == "user" for e in plan.exchanges)
    left = sum(count(m) for m in messages if m.seq > plan.last_seq)
    assert left <= (room - 900) // 2
    one_less = sum(count(m) for m in messages if m.seq > plan.exchanges[-1].first_seq - 1)
    assert one_less > (room - 900) // 2  # it covered no more than needed


@given(st.lists(st.integers(1, 400), min_size=2, max_size=30), st.integers(200, 4000))
def test_plan_property_whole_exchanges_and_never_the_current_one(sizes, room):
    messages = [Message(i + 1, "user" if i % 2 == 0 else "assistant", "x" * size)
                for i, size in enumerate(sizes)]
    current = max(m.seq for m in messages if m.role == "user")
    plan = plan_summary(messages, RunningSummary(), current, count, room, 0)
    if plan is None:
        return
    covered = [m for e in plan.exchanges for m in e.messages]
    assert [m.seq for m in covered] == list(range(1, plan.last_seq + 1))
    assert plan.last_seq < current
    boundaries = {e.first_seq for e in group_exchanges(messages)}
    assert plan.last_seq + 1 in boundaries


def test_summary_request_clips_long_messages_names_tool_results_and_fits():
    messages = paste_conversation()
    plan = SummaryPlan(tuple(group_exchanges(messages)))
    request = summary_request(plan, RunningSummary(), lambda t: len(t) // 4, room=1000)
    assert request is not None
    system, text = request
    assert len(system + text) // 4 <= 1000
    assert "characters left out" in text and "svc0" in text
    assert "#4 Tool result: clock for “next friday” (not shown)" in text
    assert "2026-12-04 is a Friday" not in text
    assert "from #1 to #5, in order: (#1–#2), (#3–#5)" in text
    assert text.rstrip().endswith("the assistant agreed.")
    assert summary_request(plan, RunningSummary(), lambda t: len(t) // 4, room=100) is None


def test_new_bullets_are_appended_and_the_oldest_go_past_the_cap():
    summary = RunningSummary(("- (#1–#2) first bullet",), covered_through=2)
    summary = append_bullets(summary, ["- (#3–#4) second bullet"], 4)
    assert summary.bullets == ("- (#1–#2) first bullet", "- (#3–#4) second bullet")
    long = [f"- (#{n}) " + "x" * 290 for n in range(5, 15)]
    summary = append_bullets(summary, long, 14)
    assert len(summary.text) <= SUMMARY_CHARS
    assert summary.bullets[-1] == long[-1] and "first bullet" not in summary.text
    assert summary.covered_through == 14


def test_bullets_that_copy_a_message_or_each_other_are_replaced_deterministically():
    messages = numbered(("Please set the billing port to 8101 in compose.yml", "Done, 8101."),
                        ("My colleague Wickling prefers tabs", "Noted."),
                        ("What is 2+2?", "4."))
    plan = SummaryPlan(tuple(group_exchanges(messages)))
    output = ("- (#1–#2) Please set the billing port to 8101 in compose.yml\n"
              "- (#3–#4) The user said Wickling prefers tabs; the assistant noted it.\n"
              "- (#5–#6) The user said Wickling prefers tabs; the assistant noted it.\n")
    bullets, replaced = accept_bullets(output, plan, [])
    assert replaced == 2
    assert bullets[1] == "- (#3–#4) The user said Wickling prefers tabs; the assistant noted it."
    assert bullets[0].startswith("- (#1–#2) The user: “Please set the billing port")
    assert "8101" in bullets[0] and "compose.yml" in bullets[0]
    assert bullets[2].startswith("- (#5–#6)") and "2+2" in bullets[2]


def test_bullets_without_message_numbers_or_repeating_the_summary_are_replaced():
    messages = numbered(("We chose PostgreSQL 16 for the ledger", "Good choice."))
    plan = SummaryPlan(tuple(group_exchanges(messages)))
    assert accept_bullets("- The user chose a database.", plan, [])[1] == 1
    previous = ["- (#1–#2) The user chose PostgreSQL 16 for the ledger service."]
    assert accept_bullets(previous[0], plan, previous)[1] == 1
    bullet = fallback_bullet(plan.exchanges[0])
    assert "PostgreSQL 16" in bullet and len(bullet) <= 320


# -- the reply path with a stand-in model ----------------------------------------------

def test_a_long_paste_is_compacted_and_the_tool_finds_it():
    conversation, model = summarizing_conversation()
    # Two exchanges after the paste still fit: the question that follows is the one that
    # no longer does, so its own reply compacts the paste before looking it up. (The
    # fillers' numbers bring the calculator's description; the question has none.)
    chat(conversation, model, ("Here is our compose file:\n" + compose_file(14),
                               "Thanks, I read it."), *(filler(n) for n in range(2)))
    assert conversation.summary.covered_through == 0
    model.enqueue('<tool_call>{"name": "conversation_history", '
                  '"arguments": {"query": "billing port"}}</tool_call>',
                  "The billing port is 8101.")
    events: list = []
    conversation.reply("Which port did billing use in the compose file?", events.append)
    kinds = [type(e) for e in events]
    assert kinds.index(SummaryStarted) < kinds.index(Summarized) < kinds.index(ToolCall)
    assert conversation.summary.covered_through >= 2
    call = next(e for e in events if isinstance(e, ToolCall))
    assert call.label == "Searching earlier in this conversation for “billing port”"
    result = next(e for e in events if isinstance(e, ToolResult))
    assert "8101:8101" in result.content and "#1 (user" in result.content
    first_prompt = model.prompts[-2]
    system = first_prompt[0].content
    assert "Earlier in this conversation (messages #1–" in system
    assert history_tool.STRATEGY in system
    assert "#1: a pasted text of" in system and "starting “Here is our compose file:”" in system
    assert all("billing:2.1" not in m.content for m in first_prompt)
    assert history_tool.NAME in model.offered[-2]
    assert events[-1] == ReplyDone("The billing port is 8101.", prompt_tokens=events[-1]
                                   .prompt_tokens, processed_tokens=events[-1].processed_tokens,
                                   completion_tokens=events[-1].completion_tokens)


def test_the_summary_event_comes_before_the_tool_call_in_the_reply_that_summarizes():
    conversation, model = summarizing_conversation()
    chat(conversation, model, *(filler(n) for n in range(3)))
    assert conversation.summary.covered_through == 0
    model.enqueue('<tool_call>{"name": "clock", "arguments": {}}</tool_call>', "Now.")
    events: list = []
    conversation.reply(filler(3)[0], events.append)
    kinds = [type(e) for e in events]
    assert kinds.index(SummaryStarted) < kinds.index(Summarized) < kinds.index(ToolCall)
    summary = next(e for e in events if isinstance(e, Summarized))
    assert summary.covered_through == conversation.summary.covered_through
    # A bullet says the day of its exchange when the one before it was on another day.
    assert re.match(r"- \(#1–#2, \w{3} \d{1,2} \w{3}\) The user and the assistant "
                    r"talked about", summary.text)
    assert "\n- (#3–#4) " in summary.text


def test_a_stored_summary_stands_in_for_what_it_covers():
    conversation, model = summarizing_conversation(context_size=8192, recall_hints=False)
    chat(conversation, model, ("The cat is called Miso", "Nice name."), ("hi", "hello"))
    conversation.state.set_summary(RunningSummary(
        ("- (#1–#2) The user's cat is called Miso.",), covered_through=2))
    chat(conversation, model, ("What is my cat called?", "Miso."))
    prompt = model.prompts[-1]
    assert "- (#1–#2) The user's cat is called Miso." in prompt[0].content
    assert [m.content for m in prompt[1:]] == ["hi", "hello", "What is my cat called?"]


def test_a_summary_that_times_out_falls_back_and_waits_six_messages():
    ticks = iter(range(0, 100000, 50))  # every look at the clock is 50 s later
    model = SummarizingModel(2048)
    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=256),
                                clock=lambda: next(ticks))
    events = chat(conversation, model, *(filler(n) for n in range(4)))
    assert any(isinstance(e, SummaryStarted) for e in events)
    failed = [e for e in events if isinstance(e, SummaryFailed)]
    assert failed and failed[0].reason == "it took longer than 120 s"
    assert failed[0].retry_at == 7 + 6
    assert not [e for e in events if isinstance(e, Summarized)]
    assert conversation.summary == RunningSummary(retry_at=7 + 6)
    attempts = len(model.summary_requests)
    chat(conversation, model, filler(4), filler(5))  # messages #9 and #11: too early
    assert len(model.summary_requests) == attempts
    assert model.prompts[-1][1].content != filler(0)[0]  # dropped instead
    chat(conversation, model, filler(6))  # message #13: six more were added
    assert len(model.summary_requests) == attempts + 1


def test_a_failing_summarizer_falls_back_to_dropping():
    conversation, model = summarizing_conversation()
    model.summaries.append(EngineError("out of memory"))
    events = chat(conversation, model, *(filler(n) for n in range(4)))
    assert [e.reason for e in events if isinstance(e, SummaryFailed)] == [
        "the model failed (out of memory)"]
    assert isinstance(events[-1], ReplyDone) and events[-1].text.startswith("Answer 3")


def test_secrets_are_redacted_in_the_request_and_in_the_summary():
    conversation, model = summarizing_conversation()
    key = "sk-proj-" + "A1b2C3d4" * 5
    model.summaries.append(f"- (#1–#2) The user shared the key {key} and password=hunter22.")
    chat(conversation, model, (f"My OpenAI key is {key} and password=hunter22 " + "x " * 300,
                               "I will not repeat it."), *(filler(n) for n in range(3)))
    assert model.summary_requests, "a summary was written"
    request = model.summary_requests[0]
    assert key not in request and "hunter22" not in request
    assert "[redacted OpenAI key]" in request
    assert key not in conversation.summary.text and "hunter22" not in conversation.summary.text
    assert "[redacted OpenAI key]" in conversation.summary.text


def test_cancelling_while_summarizing_ends_the_reply_without_a_summary():
    conversation, model = summarizing_conversation()
    chat(conversation, model, *(filler(n) for n in range(3)))
    cancel = CancelToken()
    model.summaries.append("- (#1–#2) " + "slow " * 100)
    events: list = []

    def emit(event: object) -> None:
        events.append(event)
        if isinstance(event, SummaryStarted):
            cancel.cancel()

    before = conversation.history.messages
    conversation.reply(filler(3)[0], emit, cancel)
    assert not [e for e in events if isinstance(e, Summarized)]
    assert events[-1] == ReplyDone("", cancelled=True)
    assert conversation.summary == RunningSummary()
    assert conversation.history.messages == before


def test_the_final_answer_keeps_the_summary_without_the_lookup_guidance():
    conversation, model = summarizing_conversation(max_tool_calls=1)
    chat(conversation, model, *(filler(n) for n in range(4)))
    assert conversation.summary.covered_through
    model.enqueue('<tool_call>{"name": "clock", "arguments": {}}</tool_call>', "Done.")
    conversation.reply("what time is it?", lambda e: None)
    final = model.prompts[-1][0].content
    assert model.offered[-1] == []
    assert "Earlier in this conversation" in final and conversation.summary.bullets[0] in final
    assert history_tool.STRATEGY not in final and "conversation_history" not in final


def test_the_history_tool_is_offered_only_with_earlier_messages():
    conversation, model = summarizing_conversation()
    chat(conversation, model, ("hello", "hi"), ("again", "yes"))
    assert history_tool.NAME not in model.offered[0]
    assert history_tool.NAME in model.offered[1]


def test_a_strong_match_in_a_covered_message_becomes_a_recall_hint():
    conversation, model = summarizing_conversation()
    chat(conversation, model, ("Here is our compose file:\n" + compose_file(12), "Read it."),
         *(filler(n) for n in range(3)))
    assert conversation.summary.covered_through >= 2
    events = chat(conversation, model, ("Which port does the billing service use?", "8101."))
    assert RecallHint(1) in events
    current = model.prompts[-1][-1].content
    assert current.startswith("Which port does the billing service use?")
    assert "message #1" in current and "8101:8101" in current
    assert len(current) < 700 + 200
    events = chat(conversation, model, ("Thanks, that helps.", "Glad to help."))
    assert not any(isinstance(e, RecallHint) for e in events)


def test_a_recall_hint_never_quotes_an_earlier_question_for_a_new_one():
    """Shown "What is the capital of France?" beside "What is the capital of Japan?", the
    embedded model answered "Paris": a question holds no fact to recall."""
    conversation, model = summarizing_conversation(recent_exchanges=0)
    chat(conversation, model, ("What is the capital of France? " + "words " * 190, "Paris."),
         ("I parked the car on level 3, spot 42. " + "words " * 190, "Noted."),
         *(filler(n) for n in range(3)))
    assert conversation.summary.covered_through >= 4
    events = chat(conversation, model, ("What is the capital of Japan?", "Tokyo."))
    assert not any(isinstance(e, RecallHint) for e in events)
    assert "France" not in model.prompts[-1][-1].content
    events = chat(conversation, model, ("Which level did I park the car on?", "Level 3."))
    assert RecallHint(3) in events
    assert "level 3, spot 42" in model.prompts[-1][-1].content


def test_clear_forgets_the_summary_too():
    conversation, model = summarizing_conversation()
    chat(conversation, model, *(filler(n) for n in range(4)))
    assert conversation.summary.covered_through
    conversation.clear()
    assert conversation.summary == RunningSummary() and not conversation.history.messages


@pytest.mark.parametrize("command_output", ["/summary"])
def test_summary_command_prints_the_summary_and_what_it_covers(command_output):
    import io

    from rich.console import Console

    from assistant.cli.chat import ChatSession

    conversation, model = summarizing_conversation()
    out = io.StringIO()
    session = ChatSession(conversation, interactive=False,
                          console=Console(file=out, highlight=False, markup=False, width=200))
    session.command(command_output)
    assert "No summary yet" in out.getvalue()
    chat(conversation, model, ("Here is our compose file:\n" + compose_file(12), "Read it."),
         *(filler(n) for n in range(3)))
    session.command(command_output)
    shown = out.getvalue()
    assert "Earlier in this conversation (messages #1–" in shown
    assert "- (#1–#2, " in shown and "#1: a pasted text of" in shown


# -- how many earlier exchanges the model sees ------------------------------------------

def test_a_model_shown_no_exchanges_sees_only_the_message_and_the_users_own_words():
    conversation, model = summarizing_conversation(recent_exchanges=0)
    chat(conversation, model, ("My name is Sam and I live in Lisbon.", "Nice to meet you."),
         ("Tell me a joke about penguins.", "Penguins wear tuxedos because they are cool."),
         *((f"Give me idea {n} for a garden.", f"Plant herbs, row {n}.") for n in range(8)),
         ("What is my name?", "Sam."))
    prompt = model.prompts[-1]
    assert [m.role for m in prompt] == ["system", "user"]
    assert prompt[-1].content.startswith("What is my name?")
    assert "My name is Sam" in prompt[-1].content  # the recall hint: the user's words
    # An earlier answer is never quoted back to it: it would copy it into the new one.
    chat(conversation, model, ("Why are penguins cool?", "They live in the cold."))
    assert "tuxedos" not in model.prompts[-1][-1].content


@pytest.mark.parametrize(("exchanges", "seen"), [(1, 1), (None, 2)])
def test_the_model_sees_the_last_exchanges_it_is_set_to(exchanges, seen):
    conversation, model = summarizing_conversation(recent_exchanges=exchanges)
    chat(conversation, model, ("First question?", "First answer."),
         ("Second question?", "Second answer."), ("Third question?", "Third answer."))
    users = [m.content for m in model.prompts[-1] if m.role == "user"]
    assert users == ["First question?", "Second question?"][2 - seen:] + ["Third question?"]
