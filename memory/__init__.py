"""Parley's conversation memory: plain data and pure functions, no engines.

The public look-back API, the same functions the conversation_history tool calls:

- `Message(seq, role, content, tool=None, query=None, at=None)`: one numbered message;
  `at` is when it was said (a datetime in local time).
- `search_history(messages, query) -> str`: the best two messages' best places for the
  query's words, each labelled with its message number, at most 4,000 characters.
- `read_message(messages, seq, offset=0) -> str`: message `seq` exactly, 4,000
  characters from `offset`, saying where the next page starts.
"""

from memory.fitting import CurrentMessageTooLong, FitResult, fit_history
from memory.history import Exchange, History, Message, group_exchanges
from memory.redaction import redact
from memory.search import HistorySearch, SearchIndexCache, read_message, search_history
from memory.summary import RunningSummary, SummaryPlan, plan_summary, summary_block

__all__ = [
    "Exchange",
    "FitResult",
    "History",
    "HistorySearch",
    "Message",
    "CurrentMessageTooLong",
    "RunningSummary",
    "SearchIndexCache",
    "SummaryPlan",
    "fit_history",
    "group_exchanges",
    "plan_summary",
    "read_message",
    "redact",
    "search_history",
    "summary_block",
]
