"""The reply as the user may get it: the model's text with loops and leaks cut off.

A small model sometimes says the same line until its answer budget runs out, or writes
its prompt's own instructions, chat-template tokens or a tool call's JSON as plain text.
`ReplyGuard` reads the streamed text and lets through only what is safe to show and
speak. When the text starts repeating itself or leaks, it says stop (`ReplyGuard.cut`):
the reply keeps what came before, and the repeat or the leak is never shown, spoken or
kept.

It holds back only what a later cut could still need:
- the word being written (a template token is one word until it is complete);
- the words at the end that could begin a run of the prompt's text ("You can use …");
- a `{` (with a code fence or `[` just before it) until its object is known not to be a
  tool call;
- the sentence being written once an earlier one exists, since it could repeat one (cuts
  for repetition fall between sentences); in the first sentence, only the words at the end
  that repeat earlier words of it. The first sentence, which voice speaks first, is so
  never held back for repetition.

The verdict depends only on the text, never on how it was split into chunks: the text
is read one character at a time, and each rule looks only at what came before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

REPEAT_WORDS = 8
"""A run of this many words said earlier in the reply is a repeat (see the README of
benchmarks for the measure: no ordinary answer repeated 8 words, every loop did)."""
SHORT_SENTENCE_WORDS = 3
"""A sentence of fewer words ("Yes.", "Thank you!") may come twice; a third time is a repeat."""
LEAK_WORDS = 6
"""A run of this many words of the prompt's own instructions is a leak."""

FALLBACK = "Sorry, I don't have a good answer to that."
"""Said when nothing of a reply is left once its loop or leak is cut."""


class CutReason(StrEnum):
    """Why a reply was cut short (the `reply-cut` event's `reason`)."""

    REPETITION = "repetition"
    """The model began to say again what it had said in this reply."""
    PROMPT_TEXT = "prompt-text"
    """It began to write the prompt's own instructions."""
    TEMPLATE_TOKEN = "template-token"
    """It wrote a chat-template token (`<|im_end|>`, `[INST]`, `</s>`…), or began a line
    as the next turn ("User:")."""
    TOOL_CALL = "tool-call"
    """It wrote a tool call's JSON as text, which Parley did not read as a call."""


@dataclass(frozen=True)
class Cut:
    reason: CutReason
    at: int
    """Where the reply's text ends: the kept text is the model's text up to here."""


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_DIGITS = re.compile(r"\d+")


def words_of(text: str) -> list[str]:
    """Words as the rules compare them: lower case, any number the same word."""
    return [_DIGITS.sub("0", w.lower().replace("’", "'")) for w in _WORD.findall(text)]


class PromptText:
    """Runs of words the model must never write: every `LEAK_WORDS` words in a row of
    the prompt's fixed text, and a few phrases the model makes up about its prompt."""

    def __init__(self, texts: list[str], phrases: tuple[str, ...] = (),
                 run_words: int = LEAK_WORDS) -> None:
        self.forbidden: set[tuple[str, ...]] = set()
        for text in texts:
            words = words_of(text)
            self.forbidden.update(tuple(words[i:i + run_words])
                                  for i in range(len(words) - run_words + 1))
        self.forbidden.update(tuple(words_of(p)) for p in phrases if words_of(p))
        self.prefixes = {run[:k] for run in self.forbidden for k in range(1, len(run) + 1)}
        self.longest = max((len(run) for run in self.forbidden), default=0)


_ROLE_LABEL = re.compile(r"(?:user|assistant|system|human):", re.IGNORECASE)
"""A line that starts like this is the model writing the next turn itself."""
_NAMED_TOKEN = re.compile(
    r"(?:</?(?:s|tool_call|tool_response|start_of_turn|end_of_turn)>|<</?SYS>>"
    r"|\[/?(?:INST|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|SYSTEM_PROMPT)\])$")
_ENDED = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bMr)(?<!\bDr)(?<!\bMs)[.!?…]+[\"')\]]*$")
"""A sentence ends here when whitespace follows (as `assistant.sentences` splits them)."""
_KEY = re.compile(r"[\"'](\w+)[\"']\s*:$")
_FENCE = re.compile(r"`{3}\w*|\[+")
"""A word that may open a tool call's JSON: a code fence, or a list's bracket."""


class ReplyGuard:
    """Feed the model's text; what comes out is safe to show. See the module's doc."""

    def __init__(self, prompt: PromptText | None = None, repeat_words: int = REPEAT_WORDS,
                 short_sentence_words: int = SHORT_SENTENCE_WORDS) -> None:
        self.prompt = prompt or PromptText([])
        self.repeat_words = repeat_words
        self.short_sentence_words = short_sentence_words
        self.text = ""
        self.released = 0
        self.cut: Cut | None = None
        self._done = 0
        """Characters read."""
        self._word_start: int | None = None
        self._words: list[str] = []
        self._starts: list[int] = []
        """Where each word's cut would fall: its whitespace-separated piece's start if it
        opens that piece ("(From" is cut with its bracket), else the word's own start."""
        self._first_seen: dict[tuple[str, ...], int] = {}
        """Each run of up to `repeat_words` words: the word number it first started at."""
        self._sentence_start: int | None = None
        self._sentence_first_word = 0
        self._sentences: dict[tuple[str, ...], int] = {}
        """Each sentence said so far (its words), and how many times."""
        self._line_start = True
        self._repeat_hold: int | None = None
        self._leak_hold: int | None = None
        self._opener: int | None = None
        """A code fence or `[` waiting for what follows: JSON or not."""
        self._json: int | None = None
        """Where the held JSON object starts (with its opener), while it is open."""
        self._json_depth = 0
        self._json_string: str | None = None
        self._json_escape = False
        self._json_keys: set[str] = set()
        self._json_first = True

    # -- feeding --------------------------------------------------------------------

    def feed(self, text: str) -> str:
        """Take more of the model's text; return what is newly safe to show."""
        if self.cut is not None:
            return ""
        self.text += text
        while self._done < len(self.text) and self.cut is None:
            self._read(self._done)
            self._done += 1
        return self._release(self.cut.at if self.cut else self._safe_end())

    def finish(self) -> str:
        """The model is done: judge the last word and sentence; return the rest to show."""
        if self.cut is None:
            self._end_word(len(self.text))
        if self.cut is None:
            self._end_sentence(len(self.text), final=True)
        return self._release(self.cut.at if self.cut else len(self.text))

    @property
    def shown(self) -> str:
        return self.text[:self.released]

    def _release(self, end: int) -> str:
        end = max(end, self.released)
        piece, self.released = self.text[self.released:end], end
        return piece

    def _stop(self, reason: CutReason, at: int) -> None:
        if self.cut is None:
            self.cut = Cut(reason, max(at, self.released))

    def _safe_end(self) -> int:
        holds = [self._word_start, self._repeat_hold, self._leak_hold, self._opener, self._json]
        return min([len(self.text), *(h for h in holds if h is not None)])

    # -- one character --------------------------------------------------------------

    def _read(self, i: int) -> None:
        char = self.text[i]
        if self._json is not None:
            self._read_json(i, char)
            if self.cut is not None:
                return
        if char.isspace():
            if self._word_start is not None:
                self._end_word(i)
            if self.cut is None and (char == "\n" or _ENDED.search(self.text, max(0, i - 64), i)):
                self._end_sentence(i)
            if char == "\n":
                self._line_start = True
            return
        if self._word_start is None:
            self._word_start = i
            if self._sentence_start is None:
                self._sentence_start = i
                self._sentence_first_word = len(self._words)
                if self._sentences:  # it could repeat an earlier one: held to its end
                    self._repeat_hold = i
        if self._opener is not None and self._json is None:
            if char in "{[":
                self._open_json(self._opener, char)
            else:
                self._opener = None
        elif char == "{" and self._json is None:
            self._open_json(i, char)
            if not self.text[self._word_start:i].strip("["):  # `[{"name": …}]` is one word
                self._json = self._word_start
        self._read_token(i, char)

    def _read_token(self, i: int, char: str) -> None:
        """Chat-template tokens, checked as each character comes (they have no spaces)."""
        if char.isalpha() or char == "/":
            if i >= 2 and self.text[i - 2:i] == "<|":
                self._stop(CutReason.TEMPLATE_TOKEN, i - 2)
        elif char in ">]":
            found = _NAMED_TOKEN.search(self.text, max(0, i - 24), i + 1)
            if found:
                self._stop(CutReason.TEMPLATE_TOKEN, found.start())

    # -- tool-call JSON --------------------------------------------------------------

    def _open_json(self, start: int, char: str) -> None:
        self._opener = None
        if char == "[":  # `[` then `{`: still maybe a list of calls
            self._opener = start
            return
        self._json, self._json_depth = start, 1
        self._json_string, self._json_escape = None, False
        self._json_keys, self._json_first = set(), True

    def _read_json(self, i: int, char: str) -> None:
        if self._json_string is not None:
            if self._json_escape:
                self._json_escape = False
            elif char == "\\":
                self._json_escape = True
            elif char == self._json_string:
                self._json_string = None
            return
        if char.isspace():
            return
        if self._json_first:
            self._json_first = False
            if char not in "\"'}":  # `{x}`, `{ 2 + 2 }`: not JSON
                self._json = None
                return
        if char in "\"'":
            self._json_string = char
        elif char == "{":
            self._json_depth += 1
        elif char == "}":
            self._json_depth -= 1
            if self._json_depth == 0:
                self._json = None  # a whole object that was no call: shown
        elif char == ":":
            key = _KEY.search(self.text, max(self._json, i - 40), i + 1)
            if key:
                self._json_keys.add(key.group(1).lower())
                if "name" in self._json_keys and self._json_keys & {"arguments", "parameters"}:
                    self._stop(CutReason.TOOL_CALL, self._json)

    # -- words and sentences ----------------------------------------------------------

    def _end_word(self, end: int) -> None:
        start, self._word_start = self._word_start, None
        if start is None:
            return
        piece = self.text[start:end]
        if self._line_start and len(self._words) and _ROLE_LABEL.fullmatch(piece.strip("*#")):
            self._stop(CutReason.TEMPLATE_TOKEN, start)
            return
        self._line_start = False
        if _FENCE.fullmatch(piece) and self._json is None:
            self._opener = start
        for number, found in enumerate(_WORD.finditer(piece)):
            word = _DIGITS.sub("0", found.group().lower().replace("’", "'"))
            self._add_word(word, start if number == 0 else start + found.start())
            if self.cut is not None:
                return

    def _add_word(self, word: str, cut_at: int) -> None:
        self._words.append(word)
        self._starts.append(cut_at)
        last = len(self._words) - 1
        self._check_leak(last)
        if self.cut is None:
            self._check_repeat(last)
        for k in range(1, self.repeat_words + 1):
            if k <= last + 1:
                self._first_seen.setdefault(tuple(self._words[last - k + 1:last + 1]), last - k + 1)

    def _check_leak(self, last: int) -> None:
        """The longest run ending here that begins a forbidden run is held; a whole one stops."""
        self._leak_hold = None
        for k in range(min(self.prompt.longest, last + 1), 0, -1):
            run = tuple(self._words[last - k + 1:last + 1])
            if run in self.prompt.forbidden:
                self._stop(CutReason.PROMPT_TEXT, self._starts[last - k + 1])
                return
            if run in self.prompt.prefixes and self._leak_hold is None:
                self._leak_hold = self._starts[last - k + 1]

    def _check_repeat(self, last: int) -> None:
        """A run of words said before, inside the sentence being written."""
        whole_sentence_held = bool(self._sentences)
        # Held, the sentence is cut at its start, so a run may begin in the sentence before
        # ("…of your houseplant. Some" said again as "…of your houseplant some days").
        in_sentence = last - self._sentence_first_word + 1
        longest = self.repeat_words if whole_sentence_held else min(self.repeat_words,
                                                                     in_sentence)
        for k in range(min(longest, last + 1), 0, -1):
            start = last - k + 1
            if self._first_seen.get(tuple(self._words[start:last + 1]), start) < start:
                if k == self.repeat_words:
                    self._stop(CutReason.REPETITION, self._repeat_hold if whole_sentence_held
                               else self._starts[start])
                elif not whole_sentence_held:  # the first sentence: only what may repeat
                    self._repeat_hold = self._starts[start]
                return
        if not whole_sentence_held:
            self._repeat_hold = None

    def _end_sentence(self, end: int, final: bool = False) -> None:
        start, self._sentence_start = self._sentence_start, None
        if start is None:
            return
        said = self._words[self._sentence_first_word:]
        while said and said[0] == "0":  # "1. Eat well." and "2. Eat well." say the same
            said = said[1:]
        key = tuple(said)
        if not key and not final and self._words[self._sentence_first_word:]:
            self._sentence_start = start  # "6. " alone: a list's number goes with its item
            return
        seen = self._sentences.get(key, 0)
        if key and (seen >= 2 or (seen and len(key) >= self.short_sentence_words)):
            self._stop(CutReason.REPETITION, start)
            return
        if final and len(key) >= self.short_sentence_words and any(
                len(s) > len(key) and s[:len(key)] == key for s in self._sentences):
            self._stop(CutReason.REPETITION, start)  # the budget ran out in a repeat
            return
        if key:
            self._sentences[key] = seen + 1
        self._repeat_hold = None
