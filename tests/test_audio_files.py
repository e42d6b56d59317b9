"""Reading audio of any format, rate and channel count; the paced file source."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from audio.errors import AudioError
from audio.files import AudioFileError, frames_of, read_audio, write_wav
from audio.pcm import require_mono_int16, to_int16
from tests.support.clips import sine
from tests.support.clocks import ManualClock


def peak_hz(pcm: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(pcm.astype(np.float64) * np.hanning(len(pcm))))
    return float(np.fft.rfftfreq(len(pcm), 1 / rate)[np.argmax(spectrum)])


def test_stereo_float_wav_at_44k1_becomes_16k_mono_int16(tmp_path):
    left, right = sine(1.0, 44100, 440, 0.6), sine(1.0, 44100, 440, 0.2)
    path = tmp_path / "stereo.wav"
    soundfile.write(path, np.stack([left, right], axis=1), 44100, subtype="FLOAT")

    pcm = read_audio(path)
    assert pcm.dtype == np.int16 and pcm.ndim == 1
    assert len(pcm) == 16000
    assert peak_hz(pcm, 16000) == pytest.approx(440, abs=1)
    # Mixed down to the channels' mean (0.4 of full scale), not summed or one channel.
    middle = pcm[2000:-2000].astype(np.float64) / 32768
    assert np.max(np.abs(middle)) == pytest.approx(0.4, abs=0.01)


def test_mono_flac_at_8k_is_upsampled(tmp_path):
    path = tmp_path / "voice.flac"
    soundfile.write(path, sine(0.5, 8000, 1000), 8000, subtype="PCM_16")
    pcm = read_audio(path)
    assert pcm.dtype == np.int16 and len(pcm) == 8000
    assert peak_hz(pcm, 16000) == pytest.approx(1000, abs=2)


def test_wav_round_trip_is_exact(tmp_path):
    pcm = np.random.default_rng(0).integers(-32768, 32768, 4800).astype(np.int16)
    write_wav(tmp_path / "a.wav", pcm, 16000)
    assert soundfile.info(tmp_path / "a.wav").subtype == "PCM_16"
    assert np.array_equal(read_audio(tmp_path / "a.wav"), pcm)


def test_to_int16_clips_instead_of_wrapping():
    assert to_int16(np.array([2.0, -2.0, 0.5, 0.0])).tolist() == [32767, -32768, 16384, 0]
    assert to_int16(np.array([1.0, -1.0], np.float32)).tolist() == [32767, -32768]


def test_to_int16_mixes_channels_down_and_passes_int16_through():
    stereo = np.array([[0.5, -0.5], [1.0, 1.0], [2.0, 2.0], [0.5, 0.0]], dtype=np.float32)
    assert to_int16(stereo).tolist() == [0, 32767, 32767, 8192]
    mono = np.array([1, -2, 32767], np.int16)
    assert to_int16(mono) is mono
    # Int16 channels are mixed in int16 units, not rescaled as if they were float.
    int_stereo = np.array([[1000, 3000], [-32768, -32768], [1, 2]], np.int16)
    assert to_int16(int_stereo).tolist() == [2000, -32768, 2]
    assert to_int16(int_stereo).dtype == np.int16


def test_require_mono_int16_refuses_float_and_multichannel_audio():
    block = np.arange(4, dtype=np.int16).reshape(-1, 1)  # sounddevice's (frames, 1)
    assert require_mono_int16(block, "the test").tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="the test takes int16 PCM, got float32"):
        require_mono_int16(np.zeros(4, np.float32), "the test")
    with pytest.raises(ValueError, match="the test takes mono PCM"):
        require_mono_int16(np.zeros((4, 2), np.int16), "the test")


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("corrupt.wav", np.random.default_rng(1).bytes(4000), "Cannot read"),
        ("empty.wav", b"", "empty"),
        ("missing.wav", None, "does not exist"),
    ],
)
def test_bad_files_raise_an_error_naming_the_file(tmp_path, name, content, says):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(AudioFileError, match=says) as caught:
        read_audio(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, AudioError) and caught.value.stage == "audio"


def test_frames_of_yields_all_audio_in_chunks():
    pcm = np.arange(1600, dtype=np.int16)  # 100 ms at 16 kHz
    chunks = list(frames_of(pcm, 16000, chunk_ms=30))
    assert [len(c) for c in chunks] == [480, 480, 480, 160]
    assert np.array_equal(np.concatenate(chunks), pcm)


def test_realtime_frames_are_paced_without_drift():
    clock = ManualClock(start=100.0)

    def sleep(seconds: float) -> None:
        assert seconds > 0
        clock.sleep(seconds)

    times = []
    source = frames_of(np.zeros(1600, dtype=np.int16), 16000, 30, True, clock, sleep)
    for i, _ in enumerate(source):
        times.append(clock.now - 100.0)
        if i == 0:
            clock.now += 0.05  # a slow consumer: the next chunk is already due
    # Each chunk comes when a microphone would have finished recording it; the delay
    # after the first is made up, not carried into later chunks.
    assert times == pytest.approx([0.03, 0.08, 0.09, 0.10])
