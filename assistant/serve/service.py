"""What `parley serve` offers: the engines, the conversations, and its `info` answer."""

from __future__ import annotations

from dataclasses import dataclass

from wyoming.event import Event
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

from assistant.serve.conversations import Conversations
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
    info: Event


def describe(stt_name: str, voice_name: str, voice_language: str, model_name: str,
             version: str) -> Event:
    """The `info` answer: speech-to-text, text-to-speech and conversation (handle)."""
    asr = AsrProgram(
        name=PROGRAM, attribution=ATTRIBUTION, installed=True, version=version,
        description="Parley's speech-to-text (Whisper, through faster-whisper)",
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
