"""The session `parley serve` shares among its clients: one model, speech-to-text, voice
and set of tools, and a new conversation for each client's conversation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assistant.confirmation import Approve, no_one_to_ask
from assistant.conversation import Conversation
from assistant.session import engines
from assistant.session.mcp import running_mcp
from assistant.session.settings import ModelSettings, Settings
from assistant.timer_tool import timers_unavailable
from assistant.tools import ToolRegistry, builtin_tools

if TYPE_CHECKING:
    from models.base import ChatModel
    from models.speech import SpeechToText, TextToSpeech

NO_TIMERS = ("Parley cannot set timers through Home Assistant: it could not ring one when "
             "it ends. Ask Home Assistant's own assistant for a timer.")
SERVE_CANNOT_ASK = ("`parley serve` has no one to ask: list the tool in trusted-tools "
                    "in its MCP server's settings to let it run there")


@dataclass
class ServedSession:
    model: ChatModel
    stt: SpeechToText
    tts: TextToSpeech
    create: Callable[[], Conversation]
    """A new conversation on the shared engines and tools."""
    approve: Approve
    """What a tool that asks first is told: no one can be asked here."""


def conversation_factory(settings: ModelSettings, model: ChatModel,
                         tools: ToolRegistry | None = None) -> Callable[[], Conversation]:
    """How the server makes a conversation: the shared model, tools and intent templates,
    its own history, summary, search and local-intent state (a question it asked)."""
    # Summaries are written after a reply, while the model is free: no reply waits for one.
    limits = engines.reply_settings(settings, engines.VOICE_HISTORY_MESSAGES, model,
                                    idle_summaries=True)
    matcher = None
    if not settings.no_local_intents:
        from assistant.local.matcher import IntentMatcher

        matcher = IntentMatcher()
    tools = tools if tools is not None else serve_tools()

    def create() -> Conversation:
        from assistant.local.answers import LocalIntents

        local = LocalIntents(matcher) if matcher is not None else None
        return Conversation(model, tools, limits, local=local)

    return create


def serve_tools() -> ToolRegistry:
    """Parley's own tools, with a timer tool that explains it cannot ring here; MCP
    servers' tools join them (`running_mcp`)."""
    tools = builtin_tools()
    tools.register(timers_unavailable(NO_TIMERS))
    return tools


@contextmanager
def served_session(settings: Settings, warn: Callable[[str], None],
                   loading: Callable[[], None] = lambda: None) -> Iterator[ServedSession]:
    """The engines and tools every client shares. MCP servers start while the models load;
    no one can be asked to confirm a change here: only the tools their config trusts run.
    `loading()` is called as the models start loading (a line on screen)."""
    tools = serve_tools()
    with running_mcp(settings.tools, tools, warn):
        loading()
        model = engines.load_model(settings.model)
        create = conversation_factory(settings.model, model, tools)
        yield ServedSession(model, engines.load_stt(settings.speech),
                            engines.load_tts(settings.speech), create,
                            no_one_to_ask(SERVE_CANNOT_ASK))
