"""What the web page and the API are sent besides the events: the numbered messages, the
summary, the timers and Parley's state, as JSON-ready dicts (docs/web.md)."""

from __future__ import annotations

from assistant.conversation import Conversation
from assistant.timers import Timer
from memory.history import Message


def message_dict(message: Message, conversation: Conversation) -> dict:
    """`{"seq", "role", "text", "at"}`, and for a tool result its `tool`, `query` and the
    `label` its step is shown with."""
    data: dict = {"seq": message.seq, "role": message.role, "text": message.content,
                  "at": message.at.isoformat(timespec="seconds") if message.at else None}
    if message.tool:
        data |= {"tool": message.tool, "query": message.query,
                 "label": conversation.tools.label(message.tool, message.arguments or {})}
    return data


def summary_dict(conversation: Conversation) -> dict:
    summary = conversation.summary
    return {"text": summary.text, "covered_through": summary.covered_through}


def timer_dict(timer: Timer, now: float) -> dict:
    """A running timer with its time left (the page counts it down from there)."""
    return {"number": timer.number, "name": timer.name, "seconds": timer.seconds,
            "description": timer.description, "left": round(timer.left(now), 1),
            "paused": timer.paused_left is not None}


def conversation_dict(conversation: Conversation) -> dict:
    """`GET /api/conversation`: the numbered messages and the summary."""
    return {"messages": [message_dict(m, conversation) for m in conversation.history.messages],
            "summary": summary_dict(conversation)}
