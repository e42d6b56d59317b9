"""A long chat with facts planted early, and the questions that ask for them back.

The memory benchmark measures recall on it and the real-model memory test checks the
summary and the look-back on it: one copy, so both speak of the same conversation.
"""

from __future__ import annotations

from assistant.conversation import Conversation, ReplySettings
from assistant.tools import builtin_tools

BILLING_COMPOSE = "services:\n" + "".join(
    f"  svc{i}:\n    image: registry.local/app{i}:1.{i}\n    ports:\n      - '{9000 + i}:80'\n"
    for i in range(10)) + "  billing:\n    image: billing:2.1\n    ports:\n      - '8101:8101'\n" \
    + "".join(f"  job{i}:\n    image: registry.local/job{i}:3.{i}\n" for i in range(8))

PLANTED = [
    ("Here is the compose file for our stack:\n" + BILLING_COMPOSE,
     "Thanks, I have the compose file with all the services."),
    ("We decided to deploy only on Fridays, after the standup.",
     "Understood: deployments happen on Fridays after the standup."),
    ("I prefer tabs over spaces for indentation in every project.",
     "Noted, you prefer tabs over spaces."),
    ("My manager is called Oriane Delacroix and she approves releases.",
     "Got it: Oriane Delacroix approves releases."),
]
RECALL_QUESTIONS = [
    ("Which port does the billing service use in the compose file?", r"8101"),
    ("Which day did we decide to deploy on?", r"friday"),
    ("Do I prefer tabs or spaces for indentation?", r"\btabs?\b"),
    ("What is my manager called?", r"oriane|delacroix"),
]
"""Each planted fact asked back, with a pattern a right answer matches."""
FILLERS = [
    ("Can you explain what a message queue is good for?",
     "A message queue lets services hand work to each other without waiting: the sender "
     "puts a message on the queue and carries on, and a worker picks it up when it can. "
     "It smooths out bursts of load and keeps work safe if a worker restarts."),
    ("How do I keep a long-running job from blocking the web server?",
     "Run it in a background worker and let the web request only enqueue it. The page can "
     "poll for the result or be told when it is done. Keep the job idempotent so a retry "
     "after a crash does no harm."),
    ("What should a good commit message say?",
     "A short summary line of what changed, then a paragraph on why it changed and what "
     "it affects. Mention anything a reviewer should check, and refer to the issue it "
     "resolves."),
    ("Is it worth writing tests for small scripts?",
     "For scripts that others run or that touch data, yes: a few tests of the parts that "
     "can go wrong save time later. For a one-off script you throw away, a careful manual "
     "run may be enough."),
    ("How often should backups be tested?",
     "Restore from a backup on a schedule, at least monthly, and after any change to the "
     "backup setup. A backup that was never restored is only a hope."),
    ("What is the difference between latency and throughput?",
     "Latency is how long one request takes from start to finish; throughput is how many "
     "requests finish per second. A system can have high throughput and still feel slow "
     "if each request waits a long time."),
]


def build_conversation(model, hints: bool) -> Conversation:
    """A conversation on `model` whose history holds the planted facts, then the fillers."""
    conversation = Conversation(model, builtin_tools(),
                                ReplySettings(answer_tokens=160, recall_hints=hints))
    for question, answer in PLANTED + FILLERS:
        conversation.history.add("user", question)
        conversation.history.add("assistant", answer)
    return conversation
