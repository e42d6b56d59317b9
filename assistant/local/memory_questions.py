"""Memory questions: the user asks about something they said, or about their own things.

"What is my name?", "where did I park the car?", "do you remember my locker code?",
"which hotel am I staying at?" can only be answered from what the user said earlier in
this conversation; a small model asked them invents an answer ("I'm Karen"). Parley
answers them from the conversation instead (`assistant.local.memory_answers`).

A question about the world ("what is the capital of Japan"), a how-to ("how do I check
the logs", "where can I buy a bike"), advice ("what should I cook") and a request ("tell
me a joke") are not memory questions and stay with the model.

The classifier is a handful of named patterns over normalized text, each a way people
ask about their own facts, and a few guards that take a sentence back out. A pattern
needs a personal anchor (my/our, I/we, "you remember") in the place a fact would sit,
so "what is the capital of Japan" never matches however many questions came before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.scan import STOPWORDS

# -- normalizing ---------------------------------------------------------------------------

_CONTRACTIONS = (
    # A question word with "'s" is "is" ("what's my name"); after a noun it is possessive
    # ("my sister's birthday") and stays.
    (r"\b(what|where|when|who|how|which|that|it|there)'s\b", r"\1 is"),
    (r"\b(what|where|when|who|how)'d\b", r"\1 did"),
    (r"\b(what|where|when|who|how)'re\b", r"\1 are"),
    (r"\bwhats\b", "what is"), (r"\bwheres\b", "where is"), (r"\bwhens\b", "when is"),
    (r"\bi'm\b", "i am"), (r"\bi've\b", "i have"), (r"\bi'd\b", "i had"),
    (r"\bwe're\b", "we are"), (r"\bwe've\b", "we have"), (r"\byou're\b", "you are"),
    (r"\bcan't\b", "cannot"), (r"\bwon't\b", "will not"), (r"\b(\w+)n't\b", r"\1 not"),
)
_LEAD_IN = re.compile(
    r"^(?:(?:hey|hi|ok|okay|so|um|uh|well|and|oh|also|now|parley|quick question|sorry|"
    r"please|one more thing|by the way)\b[\s,]*)+")


def normalized(text: str) -> str:
    """Lowercase words and single spaces, contractions spelled out, greetings and
    trailing punctuation gone: "Hey, what's my dog's name?" → "what is my dog's name"."""
    text = text.lower().replace("’", "'").replace("‘", "'")
    for pattern, replacement in _CONTRACTIONS:
        text = re.sub(pattern, replacement, text)
    text = re.sub(r"[^\w'\s-]", " ", text)  # punctuation: "wi-fi" and "sister's" stay
    text = " ".join(text.split())
    text = _LEAD_IN.sub("", text)
    return re.sub(r"\s+(?:please|again|then)$", "", text).strip()


# -- the patterns ----------------------------------------------------------------------------

_WH = r"(?:what|where|when|who|whom|whose|which|how (?:old|many|much|long|tall|big|far|often))"
_WH_PHRASE = rf"{_WH}(?: [\w'-]+){{0,3}}?"
"""A question word and up to three words of its own: "what", "what time", "which hotel",
"how many kids", "what kind of car". A bare "how" asks how to do something and is not one."""
_MINE = r"(?:my|our|mine|ours)"
_ME = r"(?:i|we)"
_BE = r"(?:is|are|was|were)"
_TELL = (r"(?:tell|told|mention|mentioned|say|said|give|gave|given|share|shared|show|showed|"
         r"shown|write|wrote|type|typed)")

PATTERNS: dict[str, re.Pattern[str]] = {name: re.compile(pattern) for name, pattern in {
    # "do you remember my parking spot", "can you recall the wifi password"
    "you remember": r"\b(?:do|can|could|did|will|would) you (?:still |even )?(?:remember|recall)\b"
                    r"|^(?:you )?(?:remember|recall) (?:my|our|what|where|when|which|who|the)\b",
    # "do you know my name", "you know my sister's name", "do you know where I parked"
    "you know mine": rf"\b(?:do|did) you (?:know|have) {_MINE}\b|^you know {_MINE}\b"
                     rf"|\bdo you know {_WH_PHRASE} (?:{_MINE}|{_ME}) "
                     rf"|^any idea {_WH_PHRASE} (?:{_MINE}|{_ME}) ",
    # "what was the wifi password I gave you", "the restaurant I mentioned, what was it"
    "I told you": rf"\b{_ME} (?:already |just )?(?:told|gave|mentioned|said|shared|showed|sent|"
                  r"wrote|typed) (?:to )?(?:you|it|earlier|before|a while ago)\b"
                  rf"|\b(?:that|which) {_ME} (?:told you|gave you|mentioned|said)\b"
                  rf"|\b{_ME} (?:mentioned|told you|gave you|said)$",
    # "did I tell you my favourite colour", "have I mentioned my sister"
    "did I tell you": rf"^(?:did|have|had) {_ME} (?:ever |already |just )?{_TELL}\b",
    # "where did I park the car", "what did I say my locker code was", "how much did I pay"
    "wh did I": rf"^{_WH_PHRASE} did {_ME}\b",
    # "did I book a table", "did we park on level 3"
    "did I": rf"^did {_ME} \w+",
    # "what is my name", "when is my sister's birthday", "how old is my son",
    # "what time is my dentist appointment", "what is the name of my dog", "the code for my"
    "wh is mine": rf"^{_WH_PHRASE} {_BE} (?:the [\w'-]+(?: [\w'-]+)? (?:of|for) )?{_MINE}\b",
    # "what did you say my name was": what Parley was told, asked the other way round
    "you said mine": rf"^{_WH_PHRASE} did you say {_MINE}\b",
    # "what does my wife do", "when does my flight leave", "what did my doctor say"
    "wh does mine": rf"^{_WH_PHRASE} (?:do|does|did) (?:my|our) [\w'-]+",
    # "which hotel am I staying at", "where was I born", "what time are we meeting"
    "wh am I": rf"^{_WH_PHRASE} (?:am i|was i|are we|were we|have i|have we|had i) [\w'-]+",
    # "where do I live", "what car do I drive", "what do I do for work"
    "wh do I own": rf"^{_WH_PHRASE} (?:do|does) {_ME} (?:live|work|have|own|drive|like|love|"
                   r"hate|prefer|study|play|support|keep|weigh|owe|do for)\b",
    # "do I have a dentist appointment", "do we have any plans on friday"
    "do I have": rf"^do {_ME} (?:still )?have (?:a|an|any|my|our|the)\b",
    # "is my appointment on tuesday", "was our flight at nine"
    "is mine": rf"^{_BE} {_MINE} [\w'-]+",
    # "remind me what my flight number is", "tell me my name", "remind me of my locker code"
    "remind me": rf"^(?:can you |could you |would you )?(?:remind me|tell me again|tell me|"
                 rf"say|read me|give me) (?:of |about )?(?:{_WH}|{_MINE})\b",
    # "i forgot where i parked", "i can't remember my locker code"
    "I forgot": rf"^{_ME} (?:forgot|forget|cannot remember|do not remember|cannot recall|"
                rf"do not recall) (?:{_WH}|{_MINE}|the|if|whether)\b",
}.items()}
"""Each way of asking about one's own facts, by name (the name says which one matched)."""

GUARDS: dict[str, re.Pattern[str]] = {name: re.compile(pattern) for name, pattern in {
    # "where can I buy a bike", "what should I cook", "do you know where I can park"
    "advice or how-to": r"\b(?:i|we) (?:can|could|should|shall|would|might|must|ought)\b"
                        r"|(?<!did )\b(?:i|we) (?:need|have|want) to\b"
                        r"|\b(?:can|could|should|shall|would|might|must) "
                        r"(?:i|we)\b|^how (?:do|does|to|can|should|would)\b|\bhow to\b",
    # "why did I get this error", "what did I do wrong", "what does my name mean"
    "trouble or meaning": r"^why\b|\b(?:wrong|mistake|error|bug|broken|crash\w*)\b"
                          r"|\b(?:mean|means|meaning|stand for)$",
    # "what's my zodiac sign if I was born in May": worked out, not remembered
    "a hypothetical": r"\b(?:if|suppose|supposing|assuming)\b",
    # "what are my options", "where is my nearest hospital": advice, or the world
    "advice about me": r"\b(?:my|our) (?:options|chances|odds|rights|nearest|closest)\b",
    # "remind me to call mom", "remind me in 10 minutes": a reminder, not a memory
    "a reminder": r"^(?:can you |could you )?remind me (?:to|in|at|tomorrow|tonight)\b",
    # "what did I ask", "which questions did I ask": the user's questions, which hold no fact
    "about questions": r"\b(?:ask|asked|asking|question|questions)\b",
    # "do you know what I mean", "is my code right", "is my plan good"
    "an opinion": r"\bwhat i mean\b|^(?:is|are|was|were) (?:my|our) [\w' -]*\b(?:right|correct|"
                  r"good|bad|ok|okay|normal|healthy|safe|fine|valid|enough|too|better|worse)\b",
}.items()}
"""Sentences a pattern catches that still ask for help, advice or an opinion."""

OUTWEIGHED = ("advice or how-to", "a hypothetical")
"""Guards a word asking what was said outweighs ("what did I say I should bring",
"do you remember if I locked the door")."""

_STRONG = re.compile(r"\b(?:remember|recall|remind|told you|tell you|mentioned|did i say|"
                     r"gave you|i said|forgot|forget)\b")
"""A word that asks what was said."""

# -- what the question is about ------------------------------------------------------------

FRAME_WORDS = frozenset(
    "remember recall remind reminder know knew tell told say said mention mentioned give gave "
    "given share shared show showed shown write wrote written type typed forgot forget "
    "cannot not do does did am is are was were be been have has had again exactly actually "
    "please still ever already just you me i my we our us mine ours it that this these those "
    "something anything thing things one ones kind sort type any some can could would will "
    "whom whose how many much earlier before ago while time going gonna supposed "
    "called named".split()) | STOPWORDS
"""Words of the question's frame, not of its topic ("do you remember", "what time")."""

NAME_WORDS = frozenset({"called", "named"})
""""What's my dog called": the topic is the dog's name."""

_TOPIC_END = frozenset(
    "is are was were be been am do does did have has had called named again please for to "
    "at in on from with that which who whom when where what why how and or but i you we it "
    "he she they again now then today tomorrow yesterday".split())


@dataclass(frozen=True)
class MemoryQuestion:
    """A question about what the user said; what to look for, and how to name it."""

    text: str
    """The question as asked."""
    pattern: str
    """The name of the pattern that recognized it."""
    words: tuple[str, ...]
    """Its content words, in order: the search query and what a statement must cover."""
    topic: str
    """What it is about, said back to the user: "your parking spot", "where you parked the car"."""
    expects: str | None = None
    """"time" for "when"/"what time", "number" for "how old/many/much": the answer must
    hold one ("my flight is BA 117" does not say when the flight is)."""


def memory_question(text: str) -> MemoryQuestion | None:
    """The memory question `text` asks, or None if it is not one."""
    said = normalized(text)
    if not said:
        return None
    pattern = next((name for name, found in PATTERNS.items() if found.search(said)), None)
    if pattern is None:
        return None
    if pattern == "I told you" and not _asks(text, said):
        return None  # "I told you my name is Sam." tells; it does not ask
    if _KEEP_THIS.match(said) and not text.rstrip().endswith("?"):
        return None  # "Remember the word lighthouse." asks Parley to keep it, not to recall
    strong = _STRONG.search(said) is not None
    for name, guard in GUARDS.items():
        if guard.search(said) and not (strong and name in OUTWEIGHED):
            return None
    words = content_words(said)
    if not words:
        return None  # "do you remember?": nothing to look for
    return MemoryQuestion(text.strip(), pattern, words, topic_of(said), expected(said))


_KEEP_THIS = re.compile(r"^(?:you )?(?:remember|recall) (?:my|our|the|this|that)\b")
"""An order to remember something, unless it ends in a question mark ("Remember my locker
code?"); "remember what I said" asks either way."""


def expected(said: str) -> str | None:
    """What kind of answer the question's own words ask for, if they say."""
    if re.match(r"^(?:when|what time|what day|which day|what date)\b", said):
        return "time"
    if re.match(r"^how (?:old|many|much)\b", said):
        return "number"
    return None


def _asks(text: str, said: str) -> bool:
    return (text.rstrip().endswith("?") or re.match(rf"^(?:{_WH}|what|do|did|can|could|is|was)\b",
                                                    said) is not None
            or re.search(r"\bwhat (?:was|is) it\b|\bwhat it (?:was|is)\b", said) is not None)


def content_words(said: str) -> tuple[str, ...]:
    """The topic's words, each once: "what's my dog called" → ("dog", "name")."""
    found: list[str] = []
    for word in said.split():
        word = word.strip("'-")
        if word.endswith("'s"):
            word = word[:-2]
        if word in NAME_WORDS:
            word = "name"
        elif word in FRAME_WORDS or not word:
            continue
        if word not in found:
            found.append(word)
    return tuple(found)


# -- the topic, said back ----------------------------------------------------------------------

_IRREGULAR_PAST = {
    "buy": "bought", "leave": "left", "put": "put", "meet": "met", "say": "said", "tell": "told",
    "go": "went", "see": "saw", "lose": "lost", "hide": "hid", "eat": "ate", "pay": "paid",
    "get": "got", "give": "gave", "set": "set", "send": "sent", "write": "wrote",
    "choose": "chose", "keep": "kept", "find": "found", "make": "made", "take": "took",
    "drive": "drove", "plan": "planned", "stop": "stopped", "drop": "dropped", "shop": "shopped",
    "do": "did", "have": "had", "bring": "brought", "read": "read", "sell": "sold",
    "forget": "forgot", "ride": "rode", "fly": "flew", "begin": "began", "win": "won",
    "spend": "spent", "think": "thought", "hear": "heard", "sit": "sat", "stand": "stood",
    "lend": "lent", "build": "built", "feel": "felt", "ring": "rang", "swim": "swam",
    "run": "ran", "come": "came", "become": "became", "book": "booked",
}


def past(verb: str) -> str:
    """"park" → "parked", "buy" → "bought", "carry" → "carried"."""
    if verb in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _yours(words: str) -> str:
    """The user's words as Parley says them back: my → your, I → you."""
    swap = {"my": "your", "our": "your", "mine": "yours", "ours": "yours", "i": "you",
            "we": "you", "me": "you", "us": "you", "am": "are", "was": "were"}
    return " ".join(swap.get(word, word) for word in words.split())


def _noun_phrase(words: list[str]) -> str:
    phrase = []
    for word in words:
        if word in _TOPIC_END or (phrase and len(phrase) == 4):
            break
        phrase.append(word)
    return " ".join(phrase)


def topic_of(said: str) -> str:
    """What a normalized question is about, as Parley names it in "I can't find anything
    in this conversation about …"."""
    # "i forgot where i parked" asks "where did i park"
    said = re.sub(rf"^{_ME} (?:forgot|forget|cannot remember|do not remember|cannot recall|"
                  r"do not recall) ", "", said)
    words = said.split()
    # "what did I tell you about the meeting" → "the meeting"
    about = re.search(r"\babout (.+)$", said)
    if about:
        return _yours(about[1])
    mine = re.search(rf"\b{_MINE}\b", said) is not None
    # "where did I park the car" → "where you parked the car"
    did = re.search(rf"^({_WH_PHRASE}) did {_ME} ([\w'-]+)(.*)$", said)
    if did and not mine and did[2] not in ("say", "tell", "mention"):
        return f"{did[1]} you {past(did[2])} {_yours(did[3])}".strip()
    # "which hotel am I staying at" → "which hotel you are staying at"; "where do I work"
    am = re.search(rf"^({_WH_PHRASE}) (am i|are we|was i|were we|do i|do we) (.+)$", said)
    if am and not mine:
        verb = {"am i": "are ", "are we": "are ", "was i": "were ",
                "were we": "were "}.get(am[2], "")
        return f"{am[1]} you {verb}{_yours(am[3])}"
    # "where i parked" (after "i forgot")
    bare = re.search(rf"^({_WH}) {_ME} (.+)$", said)
    if bare and not mine:
        return f"{bare[1]} you {_yours(bare[2])}"
    # "what is the name of my dog" → "your dog's name"
    of_mine = re.search(rf"\bthe ([\w'-]+) of {_MINE} (.+)$", said)
    if of_mine:
        phrase = _noun_phrase(of_mine[2].split())
        if phrase:
            return f"your {phrase}'s {of_mine[1]}"
    # "what is my sister's birthday" → "your sister's birthday"; "what's my dog called"
    for index, word in enumerate(words):
        if word in ("my", "our"):
            phrase = _noun_phrase(words[index + 1:])
            if phrase:
                named = re.search(r"\b(?:called|named)\b", said) is not None
                return f"your {phrase}'s name" if named and not phrase.endswith("name") \
                    else f"your {phrase}"
    # "what was the wifi password I gave you" → "the wifi password"; "do I have a …"
    for index, word in enumerate(words):
        if word in ("the", "a", "an", "any"):
            phrase = _noun_phrase(words[index + 1:])
            if phrase:
                return f"{word} {phrase}"
    content = content_words(said)
    return " ".join(content) if content else "that"
