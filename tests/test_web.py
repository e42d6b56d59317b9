"""`parley web`'s server as scripts and pages use it: a real uvicorn server on 127.0.0.1
(a free port), the session built as `parley web` builds it, a stand-in language model,
and WebSocket clients.

What a user (or a script) relies on: nothing is served without the token; a message sent
gets its reply streamed to every tab, numbered in the conversation the API gives; a tab
that connects later sees the conversation so far and then the live events; Stop stops a
reply; a tool that asks first runs on a Yes from any tab and not on a No; a message the
server cannot take gets a clear error and the conversation goes on.
"""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import InvalidStatus

from assistant.cli.main import main
from assistant.session import engines
from assistant.session.settings import ModelSettings, SavingSettings, Settings
from tests.support.clocks import HUNG_S
from tests.support.conversations import filler
from tests.support.fakes import ScriptedChatModel, SummarizingModel
from tests.support.web import EndlessModel, asking_tool, scripted_model, tool_call, web_server


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    return scripted_model(monkeypatch)


def types(messages: list[dict]) -> list[str]:
    return [m["type"] for m in messages]


def test_nothing_is_served_without_the_token(model):
    with web_server() as server:
        for token in (None, "wrong"):
            for path in ("/", "/api/conversation", "/static/app.js"):
                status, body = server.get(path, token)
                assert status == 403 and "needs the token" in body, (path, token)
        with pytest.raises(InvalidStatus) as refused:
            server.tab("wrong")
        assert refused.value.response.status_code == 403
        assert b"needs the token" in refused.value.response.body
        status, page = server.get("/")
        assert status == 200 and "<title>Parley</title>" in page


def test_a_message_is_answered_streamed_and_numbered(model):
    model.enqueue("Hello there, Sam. How are you?")
    with web_server() as server:
        tab = server.tab()
        first = tab.next()
        assert first["type"] == "conversation" and first["messages"] == []
        assert first["state"] == "idle"
        tab.send({"type": "text", "text": "Hi, I am Sam."})
        got = tab.until_idle()
        assert got[0] == {"type": "state", "state": "thinking"}
        user = next(m for m in got if m["type"] == "message")
        assert (user["seq"], user["role"], user["text"]) == (1, "user", "Hi, I am Sam.")
        deltas = [m["text"] for m in got if m["type"] == "text-delta"]
        assert len(deltas) > 1 and "".join(deltas) == "Hello there, Sam. How are you?"
        done = next(m for m in got if m["type"] == "reply-done")
        assert done["text"] == "Hello there, Sam. How are you?" and not done["cancelled"]
        answer = [m for m in got if m["type"] == "message"][-1]
        assert (answer["seq"], answer["role"]) == (2, "assistant")
        assert types(got).index("message") < types(got).index("text-delta")
        api = server.conversation()
        assert [(m["seq"], m["role"], m["text"]) for m in api["messages"]] == [
            (1, "user", "Hi, I am Sam."), (2, "assistant", "Hello there, Sam. How are you?")]
        assert all(m["at"] for m in api["messages"])
        assert api["summary"] == {"text": "", "covered_through": 0}


def test_a_second_tab_sees_the_conversation_so_far_and_the_live_events(model):
    model.enqueue("First answer.", "Second answer.")
    with web_server() as server:
        one = server.tab()
        one.next()
        one.send({"type": "text", "text": "First question."})
        one.until_idle()
        two = server.tab()
        joined = two.next()
        assert [m["text"] for m in joined["messages"]] == ["First question.", "First answer."]
        two.send({"type": "text", "text": "Second question."})
        for tab in (one, two):
            got = tab.until_idle()
            assert "".join(m["text"] for m in got if m["type"] == "text-delta") == \
                "Second answer."
            assert [m["seq"] for m in got if m["type"] == "message"] == [3, 4]


def test_stop_stops_the_reply_and_the_message_queued_behind_it(monkeypatch):
    endless = EndlessModel()
    monkeypatch.setattr(engines, "load_model", lambda chosen: endless)
    with web_server() as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "Tell me everything."})
        tab.until_type("text-delta")
        tab.send({"type": "text", "text": "And more."})  # waits its turn, as in voice
        tab.send({"type": "stop"})
        got = tab.until_idle()
        done = next(m for m in got if m["type"] == "reply-done")
        assert done["cancelled"]
        assert "error" not in types(tab.seen)
        kept = server.conversation()["messages"]
        assert [m["text"] for m in kept if m["role"] == "user"] == ["Tell me everything."]


@pytest.mark.parametrize("answer, runs", [("yes", True), ("no", False)])
def test_a_tool_that_asks_first_runs_on_the_first_tabs_yes_only(model, answer, runs):
    model.enqueue(tool_call("notes__delete_note", {"name": "a.txt"}), "Done as you said.")
    ran: list[dict] = []
    with web_server() as server:
        server.room.conversation.tools.register(asking_tool(ran))
        asker, other = server.tab(), server.tab()
        asker.next(), other.next()
        asker.send({"type": "text", "text": "Delete a.txt."})
        asked = other.until_type("confirm-asked")[-1]
        assert asked["question"] == "Shall I run delete note on notes, with name a.txt?"
        other.send({"type": "confirm", "answer": answer})
        answered = asker.until_type("confirm-answered")[-1]
        assert (answered["allowed"], answered["outcome"]) == (runs, answer)
        asker.send({"type": "confirm", "answer": "yes"})  # too late: the first answer won
        assert "No question is waiting" in asker.until_type("error")[-1]["message"]
        if {"type": "state", "state": "idle"} not in asker.seen:  # the reply may end first
            asker.until_idle()
    assert ran == ([{"name": "a.txt"}] if runs else [])


def test_a_message_the_server_cannot_take_gets_a_clear_error_and_the_talk_goes_on(model):
    model.enqueue("Still here.")
    with web_server() as server:
        tab = server.tab()
        tab.next()
        for bad, said in (("{not json", "not a JSON object"), ('"text"', "not a JSON object"),
                          (json.dumps({"type": "dance"}), "Unknown message type"),
                          (json.dumps({"type": "text", "text": "  "}), "non-empty")):
            tab.send(bad)
            error = tab.next()
            assert error["type"] == "error" and error["stage"] == "request"
            assert said in error["message"]
        tab.send({"type": "text", "text": "Are you there?"})
        got = tab.until_idle()
        assert next(m for m in got if m["type"] == "reply-done")["text"] == "Still here."


def test_a_summary_written_between_turns_reaches_the_tabs_and_the_api(monkeypatch):
    summarizing = SummarizingModel(2048)
    monkeypatch.setattr(engines, "load_model", lambda chosen: summarizing)
    settings = Settings(model=ModelSettings(no_local_intents=True, ctx=2048,
                                            answer_tokens=256))
    with web_server(settings) as server:
        tab = server.tab()
        tab.next()
        summary = None
        for n in range(5):
            question, answer = filler(n)
            summarizing.enqueue(answer)
            tab.send({"type": "text", "text": question})
            tab.until_idle()
            assert server.room.wait_between_turns(HUNG_S)
            if server.room.conversation.summary.covered_through:
                # It may come before Parley is idle: the voice loop begins that work as
                # soon as the reply is written.
                written = [m for m in tab.seen if m["type"] == "summary"]
                summary = written[-1] if written else tab.until_type("summary")[-1]
                break
        assert summary is not None, "no summary was written"
        kinds = types(tab.seen)
        assert kinds.index("summary-start") < kinds.index("summary")
        api = server.conversation()["summary"]
        assert api["covered_through"] == summary["covered_through"] >= 2
        assert api["text"] == summary["text"] and "topic 0" in api["text"]


@pytest.mark.parametrize("uri", ["127.0.0.1:8765", "tcp://127.0.0.1:8765", "http://:80",
                                 "http://127.0.0.1:99999", "http://127.0.0.1:8765/chat"])
def test_a_wrong_address_is_one_line_before_anything_loads(uri, capsys, monkeypatch):
    monkeypatch.setattr(engines, "load_model", lambda chosen: pytest.fail("loaded a model"))
    assert main(["web", "--uri", uri]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == (f"parley: --uri {uri!r} is not http://HOST:PORT (for example "
                        "http://127.0.0.1:8765; port 0 picks a free one)\n")


def test_a_tab_that_joins_mid_reply_gets_the_reply_so_far_then_the_rest(monkeypatch):
    monkeypatch.setattr(engines, "load_model", lambda chosen: EndlessModel())
    with web_server() as server:
        one = server.tab()
        one.next()
        one.send({"type": "text", "text": "Tell me everything."})
        one.until_type("text-delta")
        two = server.tab()
        joined = two.next()
        assert joined["state"] == "thinking"
        assert [m["text"] for m in joined["messages"]] == ["Tell me everything."]
        so_far = "".join(m["text"] for m in joined["live"] if m["type"] == "text-delta")
        assert so_far.startswith("detaaa ")
        two.send({"type": "stop"})
        rest = two.until_idle()
        done = next(m for m in rest if m["type"] == "reply-done")
        assert done["cancelled"]
        shown = so_far + "".join(m["text"] for m in rest if m["type"] == "text-delta")
        assert shown.strip() == done["text"].strip()


def test_a_saved_conversation_is_served_again_with_resume(model, tmp_path):
    talk = tmp_path / "talk.parley"
    model.enqueue("Noted: the locker code is 4812.")
    saving = Settings(model=ModelSettings(no_local_intents=True),
                      saving=SavingSettings(save=talk))
    with web_server(saving) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "My locker code is 4812."})
        tab.until_idle()
    resuming = Settings(model=ModelSettings(no_local_intents=True),
                        saving=SavingSettings(resume=talk))
    with web_server(resuming) as server:
        joined = server.tab().next()
        assert [(m["seq"], m["text"]) for m in joined["messages"]] == [
            (1, "My locker code is 4812."), (2, "Noted: the locker code is 4812.")]
