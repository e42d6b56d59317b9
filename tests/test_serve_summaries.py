"""`parley serve` writes a conversation's summary after its reply, while the model is free,
and the next request stops it: no reply waits for a summary (stand-in model)."""

from __future__ import annotations

import asyncio

from wyoming.info import Info

from assistant.conversation import Conversation, ReplySettings
from assistant.serve.connection import Connection
from assistant.serve.conversations import Conversations
from assistant.serve.engines import Engines
from assistant.serve.service import Service
from assistant.serve.wire import read_event
from assistant.tools import builtin_tools
from memory.summary import RunningSummary
from tests.support.clocks import HUNG_S
from tests.support.conversations import chat, filler
from tests.support.fakes import HeldSummaries


class Writer:
    """Takes the events a connection sends, as a socket's StreamWriter would."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def writelines(self, lines) -> None:
        for line in lines:
            self.sent += line

    def write(self, data: bytes) -> None:
        self.sent += data

    async def drain(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    async def replies(self) -> list[str]:
        """The type of each handled or not-handled event sent."""
        reader = asyncio.StreamReader()
        reader.feed_data(bytes(self.sent))
        reader.feed_eof()
        found = []
        while (event := await read_event(reader)) is not None:
            if event.type in ("handled", "not-handled"):
                found.append(event.type)
        return found


def server(model: HeldSummaries) -> Service:
    settings = ReplySettings(answer_tokens=256, idle_summaries=True)

    def create() -> Conversation:
        return Conversation(model, builtin_tools(), settings)

    return Service(Engines(None, None), Conversations(create), "voice",  # type: ignore
                   Info().event())


def connect(service: Service) -> Connection:
    """A client's connection (inside the event loop: its reader belongs to it)."""
    return Connection(service, asyncio.StreamReader(), Writer())  # type: ignore[arg-type]


async def ask(connection: Connection, model: HeldSummaries, n: int, key: str) -> None:
    question, answer = filler(n)
    model.enqueue(answer)
    await connection.handle_transcript({"text": question, "context": {"conversation_id": key}})


def test_the_summary_is_written_after_a_reply_so_the_next_reply_has_it():
    model = HeldSummaries()
    service = server(model)
    replies: list = []

    async def scenario() -> Conversation:
        connection = connect(service)
        for n in range(4):
            await ask(connection, model, n, "kitchen")
            await asyncio.gather(*service.background)  # the time before the next request
        replies.extend(await connection.writer.replies())
        return service.conversations.get("kitchen").conversation

    try:
        kitchen = asyncio.run(scenario())
    finally:
        service.engines.close()
    assert kitchen.summary.covered_through >= 2  # written between the requests
    assert "Earlier in this conversation" in model.prompts[-1][0].content
    assert replies == ["handled"] * 4


def test_a_request_stops_the_summary_being_written_and_is_answered_first():
    model = HeldSummaries(hold=1)  # its first summary goes on until Parley stops it
    service = server(model)
    replies: list = []

    async def scenario() -> None:
        connection = connect(service)
        kitchen = service.conversations.get("kitchen")
        chat(kitchen.conversation, model, filler(0), filler(1), filler(2))  # one after another
        service.summarize_later(kitchen)  # the model is free: the summary the next needs
        assert await asyncio.to_thread(model.held.wait, HUNG_S), "no summary began"
        # Another client wants the model: it is answered, not held until the summary ends
        # (the stand-in holds it for HUNG_S unless stopped).
        await asyncio.wait_for(ask(connection, model, 3, "garage"), HUNG_S / 4)
        await asyncio.wait_for(asyncio.gather(*service.background), HUNG_S)
        replies.extend(await connection.writer.replies())

    try:
        asyncio.run(scenario())
    finally:
        service.engines.close()
    assert model.cancelled == 1  # stopped, not finished behind the reply
    assert service.conversations.get("kitchen").conversation.summary == RunningSummary()
    assert replies == ["handled"]  # the garage's answer
