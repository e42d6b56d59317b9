"""The recall part of `benchmarks.tool_model`: a long paste, compacted out of the prompt, then
questions about its details that only conversation_history can answer."""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field

COMPOSE = "services:\n" + "".join(
    f"  svc{i}:\n    image: registry.local/app{i}:1.{i}\n    ports:\n      - '{9000 + i}:80'\n"
    f"    environment:\n      - LOG_LEVEL=info\n" for i in range(12)) + (
    "  billing:\n    image: billing:2.1\n    ports:\n      - '8101:8101'\n"
    "    depends_on:\n      - ledger-db\n") + "".join(
    f"  job{i}:\n    image: registry.local/job{i}:3.{i}\n    restart: always\n" for i in range(10))

ENV_FILE = "".join(f"FEATURE_FLAG_{i}=on\nWORKER_{i}_CONCURRENCY={i + 2}\n" for i in range(30)) + (
    "DATABASE_URL=postgres://app@db-7.internal:5433/ledger\n"
    "SMTP_HOST=mail.kestrel.io\nSMTP_PORT=2525\n") + "".join(
    f"CACHE_{i}_TTL={60 * (i + 1)}\n" for i in range(30))

CHECKLIST = "\n".join(
    [f"{i}. Check that service area {i} has signed off its changes and its dashboards "
     "are green." for i in range(1, 20)]
    + ["20. The release manager is Tomasz Wren; he runs the go or no-go call.",
       "21. For a rollback, call Priya on extension 4417 before anything else."]
    + [f"{i}. Post the release note for area {i - 21} in the team channel." for i in range(22, 36)])

PASTES = [
    ("Here is the compose file for our stack:\n" + COMPOSE,
     [("Which port does the billing service use in the compose file?", r"8101"),
      ("Which image version does the billing service run?", r"2\.1")]),
    ("Here is our production env file:\n" + ENV_FILE,
     [("Which port does the database use in the env file I pasted?", r"5433"),
      ("Which SMTP host did the env file set?", r"kestrel")]),
    ("This is our release checklist:\n" + CHECKLIST,
     [("Who is the release manager in the checklist I pasted?", r"wren"),
      ("Which extension should I call for a rollback?", r"4417")]),
]


@dataclass
class RecallTally:
    asked: int = 0
    right: int = 0
    looked_up: int = 0
    """Questions where the model called conversation_history."""
    right_after_lookup: int = 0
    compacted: int = 0
    seconds: list[float] = field(default_factory=list)
    summary_seconds: list[float] = field(default_factory=list)


def bench_recall(path: str, ctx: int, modes: list[str], parley, fillers, tools) -> None:
    """`parley(mode)`: Parley as it is or was; `tools()`: a fresh tool registry."""
    from assistant.conversation import Conversation, ReplySettings
    from assistant.events import Summarized, SummaryStarted, ToolCall
    from models.llama import LlamaChatModel

    model = LlamaChatModel(path, context_size=ctx)
    print(f"\nRecall: {len(PASTES)} pastes × 2 questions, context {ctx:,} tokens, "
          "answers up to 256 tokens, recall hints off, in-process")
    for mode in modes:
        tally = RecallTally()
        with parley(mode):
            for paste, questions in PASTES:
                conversation = Conversation(model, tools(), ReplySettings(
                    answer_tokens=256, recall_hints=False))
                # The paste and the filler exchanges are put in the history as said: what
                # is measured is the summary that covers them and the questions after it.
                conversation.history.add("user", paste)
                conversation.history.add("assistant", "Thanks, I have it.")
                for question, answer in fillers:
                    conversation.history.add("user", question)
                    conversation.history.add("assistant", answer)
                paste_seq = 1
                for question, expected in questions:
                    timed = []
                    started = time.monotonic()
                    done = conversation.reply(question,
                                              lambda e, t=timed: t.append((time.monotonic(), e)))
                    seconds = time.monotonic() - started
                    _time_summary(timed, tally, SummaryStarted, Summarized)
                    events = [e for _, e in timed]
                    if question == questions[0][0]:
                        covered = conversation.summary.covered_through >= paste_seq
                        tally.compacted += covered
                        print(f"  {mode}: paste {paste.splitlines()[0]!r} and "
                              f"{len(fillers)} filler exchanges: "
                              f"{'summarized out of the prompt' if covered else 'NOT summarized'}"
                              f" in the first question's reply", flush=True)
                    answer = done.text if done else ""
                    looked = any(isinstance(e, ToolCall) and e.name == "conversation_history"
                                 for e in events)
                    right = bool(re.search(expected, answer, re.IGNORECASE))
                    tally.asked += 1
                    tally.right += right
                    tally.looked_up += looked
                    tally.right_after_lookup += right and looked
                    tally.seconds.append(seconds)
                    calls = [f"{e.name}{e.arguments}" for e in events if isinstance(e, ToolCall)]
                    print(f"    {question!r}: {'right' if right else 'wrong'}, {seconds:.1f} s, "
                          f"calls {calls or '-'}; said {answer[:90]!r}", flush=True)
        summaries = (f"{len(tally.summary_seconds)} summaries, median "
                     f"{statistics.median(tally.summary_seconds):.1f} s"
                     if tally.summary_seconds else "no summary written")
        print(f"  {mode}: {tally.right}/{tally.asked} right, conversation_history called for "
              f"{tally.looked_up}/{tally.asked} (right after it: {tally.right_after_lookup}); "
              f"pastes compacted {tally.compacted}/{len(PASTES)}; seconds per question "
              f"median {statistics.median(tally.seconds):.1f} (max {max(tally.seconds):.1f}); "
              f"{summaries}", flush=True)


def _time_summary(timed: list, tally: RecallTally, started_type, done_type) -> None:
    """The seconds from the summary's start to its end, from the events' arrival times."""
    start = next((t for t, e in timed if isinstance(e, started_type)), None)
    end = next((t for t, e in timed if isinstance(e, done_type)), None)
    if start is not None and end is not None:
        tally.summary_seconds.append(end - start)
