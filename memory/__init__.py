"""Parley's conversation memory: plain data and pure functions, no engines."""

from memory.fitting import FitResult, PromptTooLarge, fit_history
from memory.history import Exchange, History, Message, group_exchanges

__all__ = [
    "Exchange",
    "FitResult",
    "History",
    "Message",
    "PromptTooLarge",
    "fit_history",
    "group_exchanges",
]
