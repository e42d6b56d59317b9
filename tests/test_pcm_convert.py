"""Any PCM a network client sends, as the 16 kHz mono int16 Whisper takes (audio.convert)."""

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from audio.convert import AudioFormatError, PcmConverter, PcmFormat, samples_as_float
from tests.support.clips import sine


def encoded(samples: np.ndarray, width: int, channels: int = 1) -> bytes:
    """Float samples as little-endian PCM of `width` bytes, each channel the same."""
    if width == 1:
        raw = np.clip(np.rint(samples * 128 + 128), 0, 255).astype(np.uint8)
    elif width == 2:
        raw = np.clip(np.rint(samples * 32768), -32768, 32767).astype("<i2")
    elif width == 4:
        raw = np.clip(np.rint(samples * 2**31), -2**31, 2**31 - 1).astype("<i4")
    else:  # 24-bit: the high three bytes of the 32-bit sample
        wide = np.clip(np.rint(samples * 2**31), -2**31, 2**31 - 1).astype("<i4")
        raw = wide.view(np.uint8).reshape(-1, 4)[:, 1:].copy()
        return np.repeat(raw, channels, axis=0).tobytes() if channels > 1 else raw.tobytes()
    return np.repeat(raw, channels).tobytes()


def converted(data: bytes, source: PcmFormat, pieces: list[int] | None = None) -> np.ndarray:
    converter = PcmConverter(source)
    parts, start = [], 0
    for size in pieces or []:
        parts.append(converter.feed(data[start:start + size]))
        start += size
    parts.append(converter.feed(data[start:]))
    parts.append(converter.finish())
    return np.concatenate(parts)


def test_16_khz_mono_16_bit_passes_through_unchanged():
    pcm = (sine(0.5, 16000).astype(np.float32) * 32767).astype(np.int16)
    assert np.array_equal(converted(pcm.tobytes(), PcmFormat(16000, 2, 1)), pcm)


@pytest.mark.parametrize(("rate", "width", "channels"), [
    (44100, 4, 2), (8000, 1, 1), (48000, 3, 1), (22050, 2, 6), (16000, 1, 2)])
def test_every_format_comes_out_as_the_same_16_khz_sound(rate, width, channels):
    source = sine(0.5, rate).astype(np.float32)
    out = converted(encoded(source, width, channels), PcmFormat(rate, width, channels))
    expected = soxr.resample(source, rate, 16000) if rate != 16000 else source
    assert abs(len(out) - len(expected)) <= 2  # half a second, whatever the rate
    n = min(len(out), len(expected))
    error = out[:n] / 32768.0 - expected[:n]
    # 8-bit audio is coarse (1/128 steps); the others are exact to the resampler.
    assert np.sqrt(np.mean(error[100:-100] ** 2)) < (0.01 if width == 1 else 0.002)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4000), max_size=8), st.sampled_from([
    PcmFormat(44100, 2, 2), PcmFormat(8000, 1, 1), PcmFormat(48000, 3, 1), PcmFormat(16000, 4, 3)]))
def test_chunks_of_any_size_even_splitting_a_frame_convert_as_the_whole_does(pieces, source):
    data = encoded(sine(0.3, source.rate).astype(np.float32), source.width, source.channels)
    whole = converted(data, source)
    assert np.array_equal(converted(data, source, pieces), whole)


def test_8_bit_is_unsigned_and_24_bit_is_signed():
    assert samples_as_float(bytes([128, 0, 255]), 1).tolist() == [0.0, -1.0, 127 / 128]
    minus_one = (-(2**23)).to_bytes(3, "little", signed=True)
    assert samples_as_float(minus_one + (2**23 - 1).to_bytes(3, "little", signed=True), 3
                            ).tolist() == pytest.approx([-1.0, 1.0], abs=1e-6)


@pytest.mark.parametrize(("rate", "width", "channels", "named"), [
    (0, 2, 1, "rate 0"), (16000, 7, 1, "width 7"), (16000, 2, 0, "channels 0"),
    ("16000", 2, 1, "rate '16000'"), (None, None, None, "rate None")])
def test_a_format_no_audio_can_have_is_refused_naming_what_is_wrong(rate, width, channels, named):
    with pytest.raises(AudioFormatError, match=named):
        PcmFormat(rate, width, channels)
