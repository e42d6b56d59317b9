"""What `parley serve` offers: the engines, the conversations, and its `info` answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from wyoming.event import Event as WyomingEvent
from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    HandleModel,
    HandleProgram,
    Info,
    TtsProgram,
    TtsVoice,
)

from assistant.serve.conversations import Conversations, Kept
from assistant.serve.engines import Engines

PROGRAM = "parley"
"""Every program Parley advertises has this name (what select-program may ask for)."""
ATTRIBUTION = Attribution(name="Parley", url="")
WHISPER = Attribution(name="OpenAI Whisper", url="https://github.com/openai/whisper")
PIPER = Attribution(name="Piper", url="https://github.com/rhasspy/piper")


@dataclass
class Service:
    engines: Engines
    conversations: Conversations
    voice_name: str
    info: WyomingEvent
    live_transcript_s: float = 0.0
    """Each time this much more audio came, a transcription's words so far are sent as
    transcript chunks (0: only its transcript at the end)."""
    background: set[asyncio.Task] = field(default_factory=set)
    """Summaries being written ahead, each holding its conversation."""

    def summarize_later(self, kept: Kept) -> None:
        """After a reply: write the summary its conversation's next turns will need, on
        the model's thread, holding the conversation meanwhile. Only if the model is free:
        queued behind others' replies it would hold the conversation (its next request
        would wait), and the model is wanted anyway; the next reply tries again."""
        if self.engines.waiting["model"]:
            return

        async def write() -> None:
            async with kept.lock:
                await self.engines.between_turns(kept.between_turns)

        task = asyncio.create_task(write())
        self.background.add(task)
        task.add_done_callback(self.background.discard)


def describe(stt_name: str, voice_name: str, voice_language: str, model_name: str,
             version: str, streams_transcripts: bool = False) -> WyomingEvent:
    """The `info` answer: speech-to-text, text-to-speech and conversation (handle)."""
    asr = AsrProgram(
        name=PROGRAM, attribution=ATTRIBUTION, installed=True, version=version,
        description="Parley's speech-to-text (Whisper, through faster-whisper)",
        supports_transcript_streaming=streams_transcripts,
        models=[AsrModel(name=stt_name, attribution=WHISPER, installed=True,
                         description="Whisper", version=None, languages=["en"])])
    tts = TtsProgram(
        name=PROGRAM, attribution=ATTRIBUTION, installed=True, version=version,
        description="Parley's voice (Piper)", supports_synthesize_streaming=True,
        voices=[TtsVoice(name=voice_name, attribution=PIPER, installed=True,
                         description="Piper voice", version=None,
                         languages=[voice_language])])
    handle = HandleProgram(
        name=PROGRAM, attribution=ATTRIBUTION, installed=True, version=version,
        description="Parley's conversation: everyday requests answered locally, the rest "
                    "by a local language model, with memory per conversation",
        models=[HandleModel(name=model_name, attribution=ATTRIBUTION, installed=True,
                            description="language model", version=None, languages=["en"])])
    return Info(asr=[asr], tts=[tts], handle=[handle]).event()
