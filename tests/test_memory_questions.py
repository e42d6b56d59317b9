"""Questions about what the user said ("what is my name", "where did I park the car")
answered from the conversation, never by the model: which sentences are memory questions,
what Parley quotes, and what it says when nothing matches."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from rich.console import Console

from assistant.cli.chat import ChatSession
from assistant.conversation import Conversation
from assistant.events import Error, ReplyDone, ToolCall, ToolResult
from assistant.local.answers import MEMORY_INTENT, LocalIntents
from assistant.local.matcher import IntentMatcher
from assistant.local.memory_answers import statements
from assistant.local.memory_questions import memory_question, normalized, past
from assistant.tools import builtin_tools
from tests.support.fakes import ScriptedChatModel
from tests.support.nodisk import run_parley

WRONG = "I'm Karen, and you parked in the garden."
"""What a stand-in model says if it is asked: a wrong answer any test would notice."""

MEMORY_QUESTIONS = [
    "What is my name?", "what's my name", "Whats my name", "Where did I park?",
    "Where did I park the car?", "What did I say my locker code was?",
    "Do you remember my parking spot?", "What was the wifi password I gave you?",
    "When is my sister's birthday?", "What's my dog called?", "Which hotel am I staying at?",
    "Did I tell you my favourite colour?", "What did I tell you about the meeting?",
    "Remind me what my flight number is.", "How old is my son?",
    "What time is my dentist appointment?", "Do you know my wife's name?",
    "You know my sister's name?", "I told you my locker code, what was it?",
    "Where do I work?", "What kind of car do I drive?", "How much did I pay for the bike?",
    "Who is my doctor?", "What's the name of my dog?", "I forgot where I parked.",
    "I can't remember my locker code.", "Tell me my name.", "Remind me of my locker code.",
    "Have I mentioned my brother?", "What did I order?", "Do I have a dentist appointment?",
    "Is my meeting on Tuesday?", "Where am I staying tonight?", "What time are we meeting?",
    "Hey Parley, what's my gym locker number?", "Do you recall the router password?",
    "What was the name of the restaurant I mentioned?", "Where was I born?",
    "When does my mum's flight land?", "What am I allergic to?", "Where did we park?",
    "Can you remember what my phone number is?", "Do you know where I parked?",
    "What's our wifi password?", "Which car is mine?", "Did I book a table for Friday?",
    "Can you tell me my locker code?", "Could you remind me where I parked?",
    "Any idea where I parked?", "What's the code for my locker?",
    "What did you say my name was?", "How old did I say my son was?", "Where are my keys?",
    "When am I seeing the dentist?", "Do you remember if I locked the door?",
    "What did I say I should bring tomorrow?", "What did I need to buy?",
    "How many kids do I have?", "Which gate is my flight?", "What was I going to buy?",
    "Remember my name?", "The code I gave you earlier, what was it?",
]

NOT_MEMORY_QUESTIONS = [
    "What is the capital of Japan?", "How do I check the logs of a docker container?",
    "What should I cook tonight?", "Where can I buy a bike?", "Tell me a joke.",
    "Remember the word lighthouse.", "Remember my code is 4417.",
    "What is the tallest mountain in the world?", "How can I improve my sleep?",
    "What should I name my new puppy?", "Why is my code slow?",
    "What is the weather like in my city?", "Who wrote Pride and Prejudice?",
    "When did World War II end?", "How many legs does a spider have?",
    "Remind me to call mom.", "Do you know where I can buy a bike?",
    "What does my name mean?", "Is my code correct?", "How do I reset my password?",
    "What's the best way to learn Spanish?", "Where do penguins live?",
    "I told you my name is Sam.", "My name is Sam.", "Do you know what I mean?",
    "What did I do wrong?", "What's 15 percent of my salary?", "What is love?",
    "What did I ask?", "Which questions did I ask you?", "Do I have to pay taxes on tips?",
    "What do I need to make pancakes?", "Where am I?", "How are you?",
    "Do you remember?", "Which one is mine?", "What are my options for a vegan dinner?",
    "What's my zodiac sign if I was born in May?", "Where is my nearest hospital?",
    "What do I have to do to get a visa?", "I need to buy milk.", "", "   ", "?",
]


@pytest.mark.parametrize("text", MEMORY_QUESTIONS)
def test_questions_about_what_the_user_said_are_memory_questions(text):
    assert memory_question(text) is not None, normalized(text)


@pytest.mark.parametrize("text", NOT_MEMORY_QUESTIONS)
def test_world_how_to_and_requests_are_not_memory_questions(text):
    assert memory_question(text) is None


@pytest.mark.parametrize(("text", "words", "topic"), [
    ("Where did I park the car?", ("park", "car"), "where you parked the car"),
    ("Do you remember my parking spot?", ("parking", "spot"), "your parking spot"),
    ("What's my dog called?", ("dog", "name"), "your dog's name"),
    ("When is my sister's birthday?", ("sister", "birthday"), "your sister's birthday"),
    ("Which hotel am I staying at?", ("hotel", "staying"), "which hotel you are staying at"),
    ("What was the wifi password I gave you?", ("wifi", "password"), "the wifi password"),
    ("What did I tell you about the meeting?", ("meeting",), "the meeting"),
    ("What's the name of my dog?", ("name", "dog"), "your dog's name"),
    ("I forgot where I left my keys.", ("left", "keys"), "your keys"),
    ("Where did I buy the lamp?", ("buy", "lamp"), "where you bought the lamp"),
])
def test_a_memory_question_says_what_to_look_for_and_how_to_name_it(text, words, topic):
    question = memory_question(text)
    assert question is not None
    assert (question.words, question.topic) == (words, topic)


@pytest.mark.parametrize(("verb", "said"), [("park", "parked"), ("leave", "left"),
                                            ("carry", "carried"), ("store", "stored"),
                                            ("stay", "stayed")])
def test_the_topic_says_a_verb_in_the_past(verb, said):
    assert past(verb) == said


def test_the_statements_of_a_message_leave_its_questions_and_requests_out():
    assert statements("My name is Sam, what's yours? Suggest a name for my goldfish.") == [
        "My name is Sam"]
    assert statements("I parked on level 3. Where is the lift?") == ["I parked on level 3."]


@pytest.fixture(scope="module")
def hypothesis_storage(tmp_path_factory):
    """Hypothesis keeps its caches under pytest's temporary folder, not in the repository."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


_FACTS = st.sampled_from(["capital of Japan", "tallest mountain", "speed of light",
                          "best pizza in town", "history of Rome", "weather tomorrow"])


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.sampled_from(["what is the", "what's the", "tell me the", "who knows the",
                              "how do I find the", "where can I see the", "explain the"]),
       fact=_FACTS, end=st.sampled_from(["?", "", ".", " please?"]))
def test_no_question_about_the_world_is_a_memory_question(hypothesis_storage, start, fact, end):
    assert memory_question(f"{start} {fact}{end}") is None


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.sampled_from(["what is my", "what's my", "do you remember my",
                              "remind me what my", "did I tell you my", "what was my",
                              "do you know my", "Hey, what's our"]),
       thing=st.sampled_from(["locker code", "wifi password", "sister's name", "car",
                              "favourite colour", "flight number"]),
       end=st.sampled_from(["?", "", " again?", "."]))
def test_asking_about_ones_own_things_is_a_memory_question(hypothesis_storage, start, thing, end):
    question = memory_question(f"{start} {thing}{end}")
    assert question is not None
    assert question.topic.startswith("your ")


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80) | st.builds(
    " ".join, st.lists(st.sampled_from(["what", "is", "my", "did", "I", "you", "remember",
                                        "'s", "?", "the", "of", "told", "park", "how", "old"]),
                       max_size=10)))
def test_any_text_is_read_without_failing(hypothesis_storage, text):
    question = memory_question(text)
    assert question is None or (question.words and question.topic)


# -- answered through a conversation ----------------------------------------------------------

@pytest.fixture(scope="module")
def matcher() -> IntentMatcher:
    return IntentMatcher()


@pytest.fixture
def talk(matcher):
    """A conversation with local intents and a stand-in model that says `WRONG` to anything
    after the scripted replies a test gives it."""
    model = ScriptedChatModel()
    conversation = Conversation(model, builtin_tools(), local=LocalIntents(matcher))

    def say(text: str) -> tuple[str, list]:
        events: list = []
        if not model.queue:
            model.enqueue(WRONG)
        done = conversation.reply(text, events.append)
        assert isinstance(done, ReplyDone), events
        return done.text, events

    return say, conversation, model


def test_what_is_my_name_quotes_the_message_that_said_it_and_the_model_is_not_asked(talk):
    say, conversation, model = talk
    model.enqueue("Nice to meet you, Sam.", "Owls can turn their heads a long way.")
    say("My name is Sam.")
    say("Tell me a fun fact about owls.")
    asked = len(model.prompts)
    reply, events = say("What is my name?")
    assert reply == "You told me in message 1: “My name is Sam.”"
    assert len(model.prompts) == asked
    # The trace a model's call would leave: the question, the search and its result, the answer.
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["conversation_history"]
    messages = conversation.history.messages[-3:]
    assert [(m.role, m.tool) for m in messages] == [
        ("user", None), ("tool", "conversation_history"), ("assistant", None)]
    assert messages[1].arguments == {"query": "name", "speaker": "user"}
    assert "My name is Sam." in messages[1].content


def test_where_did_i_park_finds_the_statement_among_others(talk):
    say, conversation, model = talk
    model.enqueue("Noted.", "Noted.", "Noted.")
    say("I parked my bike outside the library.")
    say("I parked the car on level 3, spot 42. Then I went shopping for shoes and a belt.")
    say("My sister's birthday is on May 3rd.")
    say("What is 17 times 23?")
    asked = len(model.prompts)
    reply, _ = say("Where did I park the car?")
    assert reply == "You told me in message 3: “I parked the car on level 3, spot 42.”"
    reply, _ = say("Do you remember my parking spot?")
    assert reply.startswith("You told me in message 3: “I parked the car on level 3")
    reply, _ = say("When is my sister's birthday?")
    assert reply == "You told me in message 5: “My sister's birthday is on May 3rd.”"
    assert len(model.prompts) == asked


def test_a_synonym_alone_or_a_request_is_no_answer(talk):
    say, _, model = talk
    model.enqueue("What a lovely name.", "Bubbles.", "Noted.")
    say("My dog is called Biscuit.")
    say("Suggest a name for my goldfish.")
    reply, _ = say("What's my name?")
    assert reply == "I can't find anything in this conversation about your name."
    say("My son just turned 7.")
    reply, _ = say("How old is my son?")  # "turned" for "old", beside "son" itself
    assert reply == "You told me in message 8: “My son just turned 7.”"


def test_either_spelling_finds_the_other(talk):
    say, conversation, model = talk
    model.enqueue("Teal is lovely.")
    say("My favourite colour is teal.")
    reply, _ = say("Did I tell you my favorite color?")  # as Whisper writes it
    assert reply == "You told me in message 1: “My favourite colour is teal.”"
    assert conversation.history.messages[-2].arguments["query"] == (
        "favorite color favourite colour")


def test_an_earlier_question_is_never_quoted_as_what_the_user_said(talk):
    say, _, model = talk
    reply, _ = say("What is my name?")
    assert reply == "I can't find anything in this conversation about your name."
    say("What is my name?")
    reply, _ = say("Do you know my name?")
    assert reply == "I can't find anything in this conversation about your name."
    assert model.prompts == []


def test_no_matching_statement_is_said_plainly_and_nothing_is_guessed(talk):
    say, conversation, model = talk
    model.enqueue("Noted.", "Noted.")
    say("My locker code is 4512.")
    say("My sister lives in Leeds.")
    reply, _ = say("Where did I park the car?")
    assert reply == "I can't find anything in this conversation about where you parked the car."
    # Only some of the question's words: "my sister" is not "my sister's birthday".
    reply, _ = say("When is my sister's birthday?")
    assert reply == "I can't find anything in this conversation about your sister's birthday."
    reply, _ = say("What's my dog called?")
    assert reply == "I can't find anything in this conversation about your dog's name."
    assert len(model.prompts) == 2
    assert conversation.history.messages[-1].content == reply


def test_a_when_or_how_many_question_needs_a_statement_that_says_one(talk):
    say, _, model = talk
    model.enqueue("Noted.", "Noted.")
    say("My flight number is BA 117.")
    say("My brother lives in Glasgow.")
    reply, _ = say("When is my flight?")
    assert reply == "I can't find anything in this conversation about your flight."
    reply, _ = say("How tall is my brother?")
    assert reply == "I can't find anything in this conversation about your brother."
    reply, _ = say("What's my flight number?")
    assert reply == "You told me in message 1: “My flight number is BA 117.”"


def test_the_first_message_can_be_a_memory_question(talk):
    # No earlier message, so no conversation_history tool yet: nothing is searched.
    say, conversation, model = talk
    reply, events = say("Where did I park the car?")
    assert reply == "I can't find anything in this conversation about where you parked the car."
    assert model.prompts == []
    assert not [e for e in events if isinstance(e, (ToolCall, ToolResult, Error))]
    assert [m.role for m in conversation.history.messages] == ["user", "assistant"]


def test_a_first_memory_question_in_chat_shows_the_answer_and_no_tool_line(matcher):
    model = ScriptedChatModel()
    model.enqueue(WRONG)
    conversation = Conversation(model, builtin_tools(), local=LocalIntents(matcher))
    out = io.StringIO()
    chat = ChatSession(conversation, interactive=False,
                       console=Console(file=out, highlight=False, markup=False, width=200))
    assert chat.run(io.StringIO("What is my name? I told you it's Sam.\n")) == 0
    assert out.getvalue() == "I can't find anything in this conversation about your name.\n"
    assert model.prompts == []


def test_a_world_question_after_a_similar_one_goes_to_the_model(talk):
    say, _, model = talk
    model.enqueue("Paris.", "Tokyo.")
    say("What is the capital of France?")
    reply, _ = say("What is the capital of Japan?")
    assert reply == "Tokyo."
    assert len(model.prompts) == 2


def test_a_long_statement_is_quoted_around_the_match(talk):
    say, _, model = talk
    model.enqueue("Noted.")
    long_story = ("We drove up early and the traffic was terrible all the way along the "
                  "coast road, so by the time we reached the town everything was full, and "
                  "after circling for what felt like an hour we finally parked the car in the "
                  "multi-storey behind the old cinema, on the fourth floor near the stairs, "
                  "which was a relief for everyone in the car after such a long morning.")
    say(long_story)
    reply, _ = say("Where did I park the car?")
    quoted = re.fullmatch(r"You told me in message 1: “(.+)”", reply)
    assert quoted is not None, reply
    assert "parked the car in the multi-storey" in quoted[1] and len(quoted[1]) <= 225
    assert quoted[1].startswith("…") and quoted[1].endswith("…")


def test_what_did_i_say_about_still_reads_every_match(talk):
    say, _, model = talk
    model.enqueue("Noted.")
    say("The billing service listens on port 8101.")
    reply, _ = say("What did I say about the billing service?")
    assert reply.startswith("In message 1, you said: “The billing service listens on port 8101.")


def test_switched_off_the_model_answers_memory_questions(matcher):
    model = ScriptedChatModel()
    model.enqueue("Noted.", WRONG)
    conversation = Conversation(model, builtin_tools(),
                                local=LocalIntents(matcher, memory_questions=False))
    conversation.reply("My name is Sam.", lambda event: None)
    done = conversation.reply("What is my name?", lambda event: None)
    assert done is not None and done.text == WRONG


def test_the_server_path_answers_memory_questions_locally(matcher):
    # The server tries the local answers first, on their own thread (`reply_locally`).
    model = ScriptedChatModel()
    model.enqueue("Noted.")
    conversation = Conversation(model, builtin_tools(), local=LocalIntents(matcher))
    conversation.reply("My locker code is 4512.", lambda event: None)
    matched, done = conversation.reply_locally("What's my locker code?", lambda event: None)
    assert matched and done is not None
    assert done.text == "You told me in message 1: “My locker code is 4512.”"
    assert LocalIntents(matcher).answer("What's my locker code?").intent == MEMORY_INTENT


# -- the embedded model, through `parley chat` ------------------------------------------------

@pytest.mark.real
def test_parley_chat_with_the_embedded_model_answers_name_and_parking(tmp_path):
    typed = (b"My name is Sam.\nTell me a fun fact about owls.\n"
             b"I parked the car on level 3, spot 42.\nWhat is 17 times 23?\n"
             b"What is my name?\nWhere did I park the car?\n")
    result = run_parley(tmp_path, typed, "chat", "--ctx", "2048", "--answer-tokens", "64",
                        now="2026-12-06T09:30:00")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = " ".join(result.stdout.decode().split())  # the terminal may wrap lines
    assert "You told me in message 1: “My name is Sam.”" in out
    assert "You told me in message 5: “I parked the car on level 3, spot 42.”" in out
    assert "Karen" not in out
