"""The conversation_history tool: the model looks back through this conversation.

Its value is the passages it shows (`memory.search.Passage`), in order.
"""

from __future__ import annotations

from assistant.tools import Tool, ToolOutput, ToolRefused
from memory.search import Found, HistorySearch
from models.base import ToolSpec

NAME = "conversation_history"
STRATEGY = (
    "When the user refers to something earlier in the conversation that is not shown, "
    "use conversation_history (not a guess), and say what was found, quoting it briefly."
)
SPEC = ToolSpec(
    NAME,
    "Search or read the earlier messages of this conversation. "
    'Give {"query": "words to look for"} to search, or {"message": N} to read message '
    'number N exactly (add "offset": K to read on from character K). Add "speaker": '
    '"user" or "assistant" to search only what that side said.',
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "message": {"type": "integer", "description": "A message number to read."},
            "offset": {"type": "integer", "description": "Character offset to read from."},
            "speaker": {"type": "string", "enum": ["user", "assistant"],
                        "description": "Search only the messages of this side."},
        },
        "additionalProperties": False,
    },
)


def label(arguments: dict) -> str:
    if "query" in arguments:
        return f"Searching earlier in this conversation for “{arguments['query']}”"
    return f"Reading message #{arguments.get('message')} from earlier in this conversation"


def history_tool(search: HistorySearch) -> Tool:
    """The tool over exactly the messages `search` was built from (one reply's)."""

    def look(arguments: dict) -> Found:
        if isinstance(arguments.get("message"), int):
            return search.page(arguments["message"], int(arguments.get("offset") or 0))
        query = str(arguments.get("query") or "").strip()
        if not query:
            raise ToolRefused('give {"query": "words to look for"} or {"message": N}.')
        speaker = arguments.get("speaker")
        if speaker in ("user", "assistant"):
            said = [m for m in search.messages.values() if m.role == speaker]
            return HistorySearch(said, search.cache).find(query)
        return search.find(query)

    def run(arguments: dict) -> ToolOutput:
        found = look(arguments)
        return ToolOutput(found.text, found.passages)

    return Tool(SPEC, run, label, read_only=True)
