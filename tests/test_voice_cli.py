"""`parley voice` through the real `main()`: the settings it is given reach the engines,
the segmenter and the voice loop it builds, and its conversation keeps at most 400 messages
with tool results of at most 4,000 characters.

The sound devices are stand-ins (a silent microphone, a speaker into memory), so what is
checked is the command's own wiring; tests/test_voice_terminal.py runs it on real devices.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.tools import RESULT_CUT_NOTE as CUT_NOTE
from tests.support.transcripts import untimed
from tests.support.voice_command import stand_in_speech


@pytest.fixture
def whisper_threads(monkeypatch) -> list[dict]:
    """The keyword arguments of every CTranslate2 Whisper model faster-whisper builds (it
    does not report its thread count once built)."""
    import ctranslate2

    real = ctranslate2.models.Whisper
    made: list[dict] = []

    def recording(*args, **kwargs):
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ctranslate2.models, "Whisper", recording)
    return made


def linked_models(folder: Path) -> tuple[Path, Path]:
    """The embedded Whisper folder and Piper voice under other names, as a user's own."""
    from models.embedded import default_stt, default_voice

    stt = folder / "my-whisper"
    stt.symlink_to(default_stt(), target_is_directory=True)
    voice = folder / "my-voice.onnx"
    voice.symlink_to(default_voice())
    (folder / "my-voice.onnx.json").symlink_to(f"{default_voice()}.json")
    return stt, voice


TUNED = {"stt-threads": "1", "tts-threads": "3", "vad-aggressiveness": "0",
         "pre-roll-ms": "450", "end-silence-ms": "900", "min-speech-ms": "120",
         "max-utterance-s": "7.5", "echo-tail-ms": "800"}


@pytest.mark.real
@pytest.mark.parametrize("given", ["flags", "environment"])
def test_the_voice_tuning_settings_reach_the_engines_segmenter_and_loop(
        voice, whisper_threads, monkeypatch, tmp_path, given):
    stt_path, voice_path = linked_models(tmp_path)
    chosen = {**TUNED, "stt-model": str(stt_path), "voice": str(voice_path)}
    argv = ["voice"]
    if given == "flags":
        for name, value in chosen.items():
            argv += [f"--{name}", value]
        argv += ["--barge-in", "--push-to-talk"]
    else:
        for name, value in {**chosen, "barge-in": "1", "push-to-talk": "1"}.items():
            monkeypatch.setenv(f"PARLEY_{name.upper().replace('-', '_')}", value)
    assert voice.run(monkeypatch, argv) == 0
    loop = voice.loop
    assert loop.stt.path == stt_path
    assert [made["intra_threads"] for made in whisper_threads] == [1]
    assert loop.tts.path == voice_path
    assert loop.tts._voice.session.get_session_options().intra_op_num_threads == 3
    segmenting = loop.segmenter.settings
    assert (segmenting.aggressiveness, segmenting.pre_roll_ms, segmenting.end_silence_ms,
            segmenting.min_speech_ms, segmenting.max_utterance_s) == (0, 450, 900, 120, 7.5)
    assert (loop.settings.echo_tail_ms, loop.settings.barge_in,
            loop.settings.push_to_talk) == (800, True, True)
    assert not loop.listening  # push-to-talk: nothing is heard before Enter


@pytest.mark.real
def test_without_settings_voice_runs_the_defaults_the_readme_lists(voice, whisper_threads,
                                                                   monkeypatch):
    from models.embedded import default_stt, default_voice

    assert voice.run(monkeypatch, ["voice"]) == 0
    loop = voice.loop
    assert loop.stt.path == Path(default_stt()) and loop.tts.path == Path(default_voice())
    assert [made["intra_threads"] for made in whisper_threads] == [2]
    assert loop.tts._voice.session.get_session_options().intra_op_num_threads == 2
    segmenting = loop.segmenter.settings
    assert (segmenting.aggressiveness, segmenting.pre_roll_ms, segmenting.end_silence_ms,
            segmenting.min_speech_ms, segmenting.max_utterance_s) == (2, 300, 700, 250, 20.0)
    assert (loop.settings.echo_tail_ms, loop.settings.barge_in,
            loop.settings.push_to_talk) == (300, False, False)
    assert loop.listening


# 9**4500 has 4,295 digits, under Python's 4,300-digit limit for turning an int into text.
BIG_POWER = "9**1000 * 9**1000 * 9**1000 * 9**1000 * 9**500"


def test_voice_cuts_a_tool_result_at_4000_characters_and_keeps_400_messages(
        voice, monkeypatch, capsys):
    stand_in_speech(monkeypatch)
    full = f"{BIG_POWER} = {9**4500}"
    assert len(full) > 4000
    voice.model.enqueue(
        f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{BIG_POWER}"}}}}'
        "</tool_call>", "That is a very big number.")
    # 3 messages (question, tool result, answer), then 199 exchanges: 401 in all.
    typed = ["Please work out the big power.", *(f"note {n}" for n in range(1, 200)),
             "/history"]
    assert voice.run(monkeypatch, ["voice"], typed) == 0

    messages = voice.loop.conversation.history.messages
    assert len(messages) == 400 and messages[0].seq == 2 and messages[-1].seq == 401
    tool = messages[0]
    assert tool.role == "tool" and tool.tool == "calculator"
    # What is kept, and what the model read: the result's head and the note, 4,000 in all.
    assert tool.content == full[:4000 - len(CUT_NOTE)] + CUT_NOTE
    assert len(tool.content) == 4000
    assert any(m.role == "tool" and m.content == tool.content
               for m in voice.model.prompts[1])

    shown = [line for line in untimed(capsys.readouterr().out).splitlines()
             if line.startswith("#")]
    assert len(shown) == 400
    assert shown[0] == f"#2 tool (calculator): {full[:200]}…"
    assert shown[1] == "#3 assistant: That is a very big number."
    assert shown[-2:] == ["#400 user: note 199", "#401 assistant: OK."]
