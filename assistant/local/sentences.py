"""Parley's own sentence templates, in hassil's format, beside Home Assistant's.

They cover what Home Assistant's English sentences miss ("set a 10 minute pizza timer",
"what day is it", "what time is it in Tokyo") and what only a conversation has
(arithmetic, "say that again", "what did I say about …", "when did I mention …").
`<what_is>`, `<the>`, `<timer_set>`, `<timer_cancel>` are Home Assistant's expansion
rules; `{timer_*}` its slot lists.
"""

from __future__ import annotations

HANDLED_HA_INTENTS = (
    "HassGetCurrentTime", "HassGetCurrentDate", "HassStartTimer", "HassCancelTimer",
    "HassCancelAllTimers", "HassTimerStatus", "HassPauseTimer", "HassUnpauseTimer",
    "HassIncreaseTimer", "HassDecreaseTimer", "HassNevermind",
)
"""Home Assistant intents Parley answers; the rest (lights, weather…) go to the model."""

_UNITS = (("timer_hours", "hours", "hour"), ("timer_minutes", "minutes", "minute"),
          ("timer_seconds", "seconds", "second"))


def _named_timer_sentences() -> list[str]:
    """"set a 10 minute pizza timer", "set a pizza timer for 10 minutes"."""
    sentences = []
    for slot_list, slot, unit in _UNITS:
        amount = f"{{{slot_list}:{slot}}}( |-){unit}[s]"
        sentences += [
            f"[<timer_set>] [a|an] {amount} {{timer_name:name}} timer",
            f"[<timer_set>] [a|an] {{timer_name:name}} timer for {amount}",
            f"[<timer_set>] [a|an] timer for {amount} for [the|my] {{timer_name:name}}",
        ]
    return sentences


PARLEY_INTENTS: dict = {
    "HassStartTimer": {"data": [{"sentences": _named_timer_sentences()}]},
    "HassGetCurrentTime": {"data": [{"sentences": [
        "[do you know|can you tell me] what time it is [[right] now]",
        "[tell me] the time [please]", "what's the time [[right] now]",
        "what time is it [[right] now] [please]", "what hour is it",
    ]}]},
    "ParleyTimeIn": {"data": [{"sentences": [
        "what time is it [right now|now] in {place}",
        "<what_is> the [current|local] time [right now|now] in {place}",
        "[the] [current|local] time in {place}",
        "[do you know|can you tell me] what time it is [right now|now] in {place}",
    ]}]},
    "HassGetCurrentDate": {"data": [{"sentences": [
        "what day is it [today]", "what day is today", "which day is it [today]",
        "what's today's date", "what is today's date", "what's the date [today]",
        "[do you know|can you tell me] what day it is [today]",
        "what's today", "what is today", "[tell me] [the|today's] date [please]",
    ]}]},
    "HassTimerStatus": {"data": [{"sentences": [
        "how much time is left", "how long is left", "how much longer",
        "how long until [the|my] timer[s] (goes off|go off|is done|are done|ends|end)",
        "(what|which) timers (do I have|are running|are there)", "list [all] [the|my] timers",
        "[do] I have any timers [running]", "are there any timers [running]",
    ]}]},
    "ParleyTimerWithoutDuration": {"data": [{"sentences": [
        "(set|start) [a|an|the] timer", "(set|start) [a|an] {timer_name:name} timer",
        "timer",
    ]}]},
    "ParleyStop": {"data": [{"sentences": [
        "stop", "stop (it|that|talking)", "be quiet", "quiet", "shut up", "cancel",
        "that's enough", "enough", "forget it", "no thanks", "never mind that",
    ]}]},
    "ParleyRepeat": {"data": [{"sentences": [
        "(say|repeat) that again", "repeat [that|it] [please]", "say again",
        "(can|could) you (say|repeat) that [again]", "what did you [just] say",
        "come again", "pardon [me]", "sorry what", "one more time",
        "repeat (your|the) last (answer|reply|sentence)",
    ]}]},
    "ParleyRecall": {"data": [{"sentences": [
        "what did (I|we) (say|write|tell you|mention|talk about) (about|regarding|on) {topic}",
        "what have (I|we) (said|told you|mentioned) (about|regarding) {topic}",
        "did I (mention|say|tell you) anything about {topic}",
        "remind me what I (said|told you) about {topic}",
        "what was (it|that) I said about {topic}",
    ]}]},
    "ParleyRecallWhen": {"data": [{"sentences": [
        "when did (I|we) (mention|say|write|talk about|tell you about|bring up|ask about) "
        "{topic}",
        "when did (I|we) (say|tell you) (something|anything) about {topic}",
        "when was {topic} (mentioned|said|brought up)",
    ]}]},
    "ParleyPercent": {"data": [{"sentences": [
        "[<what_is>|how much is|calculate] {number_a} (percent|%) of {number_b}",
        "{number_a}% of {number_b}",
    ]}]},
    "ParleySquareRoot": {"data": [{"sentences": [
        "[<what_is>|how much is|calculate] [the] square root of {number_a}",
    ]}]},
    "ParleyCalculate": {"data": [{"sentences": [
        "<what_is> {expression}", "how much is {expression}",
        "(calculate|compute|work out|evaluate) {expression}",
        "what do you get (if|when) you (compute|calculate) {expression}",
        "{expression} (equals|is) what", "{expression}",
    ]}]},
}

PARLEY_LISTS: dict = {
    "topic": {"wildcard": True},
    "place": {"wildcard": True},
    "expression": {"wildcard": True},
    "number_a": {"wildcard": True},
    "number_b": {"wildcard": True},
}
