"""The running summary: what stands in for the exchanges that no longer fit.

Pure functions over the history: when to summarize and what to cover
(`plan_summary`), what the summarizer is asked (`summary_request`), which of its
bullets to keep (`accept_bullets`, with deterministic bullets for the ones that fail),
and how the summary appears in the system prompt (`summary_block`). The model call
itself lives in the assistant's core; a stand-in model covers all of this in tests.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from memory.history import Exchange, Message, group_exchanges, said_on
from memory.redaction import redact

SUMMARY_RESERVE_TOKENS = 900
"""Room kept for a full-size summary when choosing what to cover."""
SUMMARY_OUTPUT_TOKENS = 300
SUMMARY_CHARS = 2000
"""Past this, the oldest bullets go first; their exchanges stay searchable."""
RETRY_AFTER_MESSAGES = 6
SUMMARY_SECONDS = 120.0
CLIP_CHARS = 900
"""A long message is shown to the summarizer as its head and tail within this size."""
BULLET_CHARS = 320
LONG_MESSAGE_CHARS = 500
"""A user message longer than this is listed as covered material by its first line."""
MATERIAL_ENTRIES = 12


@dataclass(frozen=True)
class RunningSummary:
    """The summary so far, the last message it covers, and when to try again after a failure."""

    bullets: tuple[str, ...] = ()
    covered_through: int = 0
    """Messages numbered up to this one are covered and stay out of the prompt."""
    retry_at: int = 0
    """After a failed attempt: no new one until the next message number reaches this."""
    fallback_bullets: int = field(default=0, compare=False)
    """How many bullets were written deterministically because the model's failed."""

    @property
    def text(self) -> str:
        return "\n".join(self.bullets)


@dataclass(frozen=True)
class SummaryPlan:
    """The exchanges a new summary will cover, oldest first."""

    exchanges: tuple[Exchange, ...]

    @property
    def first_seq(self) -> int:
        return self.exchanges[0].first_seq

    @property
    def last_seq(self) -> int:
        return self.exchanges[-1].last_seq


def is_text(message: Message) -> bool:
    """The conversation's own text: what the user and the assistant said."""
    return message.role in ("user", "assistant")


def plan_summary(
    messages: Sequence[Message],
    summary: RunningSummary,
    current_seq: int,
    count: Callable[[Message], int],
    room: int,
    summary_tokens: int,
    reserve: int = SUMMARY_RESERVE_TOKENS,
    ahead: int = 0,
) -> SummaryPlan | None:
    """What to cover, or None while the conversation's text fits beside the summary.

    When it does not fit, the oldest exchanges are covered, whole, until the newest
    ones fill at most half the room left beside a full-size summary: the next summary
    then waits until the conversation has grown by that half again. `ahead`: tokens of
    turns still to come that must fit too (a summary written before they need it);
    what is covered is the same.
    """
    uncovered = [m for m in messages if m.seq > summary.covered_through]
    sizes = {m.seq: count(m) for m in uncovered if is_text(m)}
    text_tokens = sum(sizes.values())
    if text_tokens + summary_tokens + ahead <= room:
        return None
    target = max(room - reserve, 0) // 2
    chosen: list[Exchange] = []
    for exchange in group_exchanges(m for m in uncovered if m.seq < current_seq):
        if text_tokens <= target:
            break
        chosen.append(exchange)
        text_tokens -= sum(sizes.get(m.seq, 0) for m in exchange.messages)
    return SummaryPlan(tuple(chosen)) if chosen else None


def clip(text: str, limit: int) -> str:
    """Head and tail of a long text, saying how much was left out between them."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} […{len(text) - head - tail:,} characters left out…] {text[-tail:]}"


def label(exchange: Exchange) -> str:
    first, last = exchange.first_seq, exchange.last_seq
    return f"(#{first})" if first == last else f"(#{first}–#{last})"


def stamped(exchange: Exchange, before: Exchange | None) -> str:
    """A bullet's label: the exchange's numbers, and its day when the exchange before
    it was on another day (or is not in this update): "(#4–#5, Sat 5 Dec)". Times of day
    would cost the prompt about seven tokens a bullet; the look-back tool shows them."""
    day = said_on(exchange.messages[0])
    if before is not None and said_on(before.messages[0]) == day:
        return label(exchange)
    return f"{label(exchange)[:-1]}, {day})" if day else label(exchange)


def transcript_line(message: Message, limit: int) -> str:
    if message.role == "tool":
        query = f" for “{clip(redact(message.query), 120)}”" if message.query else ""
        return f"#{message.seq} Tool result: {message.tool}{query} (not shown)"
    who = "User" if message.role == "user" else "Assistant"
    return f"#{message.seq} {who}: {clip(redact(message.content), limit)}"


SUMMARIZER_SYSTEM = (
    "You keep notes on a conversation between a user and an assistant, for the "
    "assistant's own memory. Write short factual bullets. Keep numbers, names, file "
    "paths, decisions and preferences exactly as they were said."
)


def summary_request_text(plan: SummaryPlan, summary: RunningSummary, limit: int) -> str:
    so_far = "\n".join(redact(b) for b in summary.bullets) or "(none yet)"
    lines = [f"Notes so far:\n{so_far}", "",
             f"Conversation, messages #{plan.first_seq} to #{plan.last_seq}:"]
    for exchange in plan.exchanges:
        lines.extend(transcript_line(m, limit) for m in exchange.messages)
    labels = ", ".join(label(e) for e in plan.exchanges)
    lines += [
        "",
        f"Write one bullet for each exchange, from #{plan.first_seq} to #{plan.last_seq}, "
        f"in order: {labels}. Start each bullet with \"- \" and its message numbers. "
        "Say what the user asked or said and what the assistant answered or decided. "
        "For example:",
        "- (#4–#5) The user asked which port the web service uses; the assistant said 8080.",
        "- (#6–#7) The user prefers short answers; the assistant agreed.",
    ]
    return "\n".join(lines)


def summary_request(
    plan: SummaryPlan,
    summary: RunningSummary,
    count_text: Callable[[str], int],
    room: int,
) -> tuple[str, str] | None:
    """(system, user) text asking for the new bullets, or None if it cannot fit `room`.

    Long messages are clipped harder until the request fits; everything is redacted.
    """
    limit = CLIP_CHARS
    while limit >= 150:
        text = summary_request_text(plan, summary, limit)
        if count_text(SUMMARIZER_SYSTEM) + count_text(text) <= room:
            return SUMMARIZER_SYSTEM, text
        limit //= 2
    return None


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_NUMBER_REF = re.compile(r"#\s?(\d+)")
_LEADING_LABEL = re.compile(r"^\(?\s*(?:messages?\s*)?#\d+(?:\s*(?:[-–—,&]|to|and)\s*#?\d+)*"
                            r"(?:,\s*[a-z]{3} \d{1,2} [a-z]{3}(?: \d{4})?)?"  # its day (stamped)
                            r"\s*\)?\s*[:.-]?\s*", re.IGNORECASE)


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", _LEADING_LABEL.sub("", text).lower()).split())


def _copies(body: str, texts: Sequence[str]) -> bool:
    """True when a bullet's body repeats an earlier text instead of summarizing it."""
    if not body:
        return True
    for text in texts:
        other = _normal(text)
        if not other:
            continue
        if len(body) >= 30 and body in other:
            return True
        if difflib.SequenceMatcher(None, body, other[:len(body) + 40]).ratio() > 0.8:
            return True
    return False


def accept_bullets(
    output: str,
    plan: SummaryPlan,
    previous: Sequence[str],
) -> tuple[list[str], int]:
    """The model's valid bullets, one per newly covered exchange, and how many were replaced.

    A bullet is valid when it names message numbers of its exchange, and is not a copy
    of a message or of another bullet. An exchange without a valid bullet gets a
    deterministic one (`fallback_bullet`).
    """
    candidates: dict[int, str] = {}
    seen = [_normal(b) for b in previous]
    for line in redact(output).splitlines():
        match = _BULLET.match(line)
        text = match.group(1) if match else line.strip()
        numbers = [int(n) for n in _NUMBER_REF.findall(text)]
        if not numbers:
            continue
        owner = next((i for i, e in enumerate(plan.exchanges)
                      if e.first_seq <= numbers[0] <= e.last_seq), None)
        if owner is None or owner in candidates:
            continue
        body = _normal(text)
        exchange = plan.exchanges[owner]
        if len(body) < 12 or body in seen or _copies(body, [m.content for m in exchange.messages]
                                                     + list(candidates.values())):
            continue
        seen.append(body)
        candidates[owner] = _LEADING_LABEL.sub("", text).strip()
    bullets, replaced = [], 0
    for number, exchange in enumerate(plan.exchanges):
        before = plan.exchanges[number - 1] if number else None
        if number in candidates:
            body = candidates[number]
            bullet = f"- {stamped(exchange, before)} {body}"
            if len(bullet) > BULLET_CHARS:
                bullet = bullet[:BULLET_CHARS - 1] + "…"
            bullets.append(bullet)
        else:
            bullets.append(fallback_bullet(exchange, before))
            replaced += 1
    return bullets, replaced


_DETAIL = re.compile(
    r"(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+"         # paths
    r"|\b[\w-]+\.(?:[a-z]{1,5})\b"                  # file names
    r"|\bv\d+(?:\.\d+)+\b"                           # versions
    r"|\b\d[\d,.:]*\d\b|\b\d\b"                     # numbers, times, ports
    r"|\b[A-Za-z]+(?:[_\d][\w]*)\b"                 # identifiers with digits or _
    r"|\b[a-z]+[A-Z]\w*\b"                          # camelCase
    r"|\b[A-Z][\w-]*[a-z][\w-]*(?:\s+[A-Z][\w-]*[a-z][\w-]*)*\b"  # names
)
_COMMON_CAPITALS = frozenset(
    "I A The This That It What When Where Which Who Why How Yes No Ok Okay Sure Thanks "
    "Thank Please Here There Hi Hello Can Could Would Should Will Do Does Did Is Are "
    "And But Or So If Then Also Let My Your We You He She They Note Noted Got".split()
)


def _starts_line(text: str, position: int) -> bool:
    before = text[:position].rstrip(" \t\"'“(")
    return not before or before[-1] == "\n"


def details(text: str) -> list[str]:
    """Numbers, names, paths and identifiers in `text`, in order, each once."""
    found: dict[str, None] = {}
    for match in _DETAIL.finditer(text):
        item = match.group().strip(".,")
        if not item or item in _COMMON_CAPITALS:
            continue
        if (" " not in item and item[:1].isupper() and item[1:].islower()
                and _starts_line(text, match.start())):
            continue  # a capital that only starts a message is not a name
        words = item.split()
        if words and words[0] in _COMMON_CAPITALS:
            item = " ".join(words[1:])
            if not item:
                continue
        found.setdefault(item, None)
    return list(found)


def fallback_bullet(exchange: Exchange, before: Exchange | None = None) -> str:
    """A bullet that needs no model: the request's first words and the exchange's details."""
    user = next((m for m in exchange.messages if m.role == "user"), exchange.messages[0])
    first_words = " ".join(redact(user.content).split()[:14])
    if len(user.content.split()) > 14:
        first_words += "…"
    parts = [f"- {stamped(exchange, before)} The user: “{first_words}”."]
    tools = [f"{m.tool} (“{clip(redact(m.query or ''), 60)}”)"
             for m in exchange.messages if m.role == "tool"]
    if tools:
        parts.append("Tools: " + ", ".join(tools) + ".")
    bullet = " ".join(parts)
    found = details(redact("\n".join(m.content for m in exchange.messages if is_text(m))))
    if found:
        bullet += " Details:"
        for number, item in enumerate(found):
            piece = (" " if number == 0 else ", ") + item
            if len(bullet) + len(piece) + 1 > BULLET_CHARS:
                break
            bullet += piece
        bullet += "."
    return bullet[:BULLET_CHARS]


def append_bullets(summary: RunningSummary, bullets: Sequence[str], covered_through: int,
                   replaced: int = 0) -> RunningSummary:
    """The summary with new bullets after the old; past the cap the oldest go first."""
    kept = [*summary.bullets, *bullets]
    while kept and len("\n".join(kept)) > SUMMARY_CHARS:
        kept.pop(0)
    return replace(summary, bullets=tuple(kept), covered_through=covered_through,
                   fallback_bullets=summary.fallback_bullets + replaced)


def covered_material(messages: Sequence[Message], covered_through: int) -> list[str]:
    """What a later turn may ask about: long pastes by first line, tool results by query."""
    entries = []
    for m in messages:
        if m.seq > covered_through:
            break
        if m.role == "tool":
            query = f" for “{clip(redact(m.query), 80)}”" if m.query else ""
            entries.append(f"#{m.seq}: {m.tool} result{query}")
        elif m.role == "user" and len(m.content) > LONG_MESSAGE_CHARS:
            first = next((line.strip() for line in m.content.splitlines() if line.strip()), "")
            entries.append(f"#{m.seq}: a pasted text of {len(m.content):,} characters "
                           f"starting “{clip(redact(first), 80)}”")
    return entries


def summary_block(summary: RunningSummary, messages: Sequence[Message],
                  with_lookup: bool) -> str:
    """The summary as the system prompt shows it, under "Earlier in this conversation"."""
    if not summary.covered_through:
        return ""
    span = f"#1–#{summary.covered_through}" if summary.covered_through > 1 else "#1"
    lines = [f"Earlier in this conversation (messages {span}, no longer shown; a summary):"]
    lines.extend(summary.bullets or ["- (summary unavailable)"])
    material = covered_material(messages, summary.covered_through)
    if material:
        more = len(material) - MATERIAL_ENTRIES
        lines.append("Material from those messages" + (
            ", which conversation_history can look up exactly:" if with_lookup else ":"))
        lines.extend(f"- {entry}" for entry in material[-MATERIAL_ENTRIES:])
        if more > 0:
            lines.append(f"- and {more} earlier ones")
    if with_lookup:
        lines.append("The summary may miss details; the exact words are available through "
                     "conversation_history.")
    return "\n".join(lines)
