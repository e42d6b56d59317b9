"""Property tests for audio Parley reads: files of any format, rate, width, channels and
length, corrupt files, and the one int16 conversion.

A file gives 16 kHz mono int16 of the length its duration says (give or take the
resampler's rounding) or an `AudioFileError` naming it; samples of any value give int16
in range, never an exception.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.extra import numpy as hnp

from audio.files import AudioFileError, read_audio, write_wav
from audio.pcm import FULL_SCALE, to_int16

# Files are written and resampled in each example: fewer examples than the text properties.
PROPERTY = settings(max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def hypothesis_storage(tmp_path_factory):
    """Hypothesis caches (Unicode tables, the code's constants) in its storage folder even
    without a database: under pytest's temporary folder here, never in the repository."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


FORMATS = st.sampled_from([("WAV", "PCM_16"), ("WAV", "PCM_24"), ("WAV", "PCM_32"),
                           ("WAV", "FLOAT"), ("WAV", "PCM_U8"), ("FLAC", "PCM_16"),
                           ("FLAC", "PCM_24"), ("FLAC", "PCM_S8")])
RATES = st.integers(4000, 96000) | st.sampled_from([8000, 11025, 22050, 44100, 48000, 96000])
TONE_HZ = 200.0
"""Below half of every rate tried, so resampling keeps it whole."""


def tone(frames: int, rate: int, channels: int, level: float) -> np.ndarray:
    """The same sine on every channel: the mixdown is that sine."""
    wave = level * np.sin(2 * np.pi * TONE_HZ * np.arange(frames) / rate)
    return np.repeat(wave[:, None], channels, axis=1).astype(np.float32)


def check_error(error: AudioFileError, path: Path) -> None:
    message = str(error)
    assert str(path) in message and "\n" not in message


@PROPERTY
@given(FORMATS, RATES, st.integers(1, 4), st.floats(0, 2.0), st.floats(0.05, 0.9))
@example(("WAV", "PCM_16"), 96000, 1, 0.0, 0.5)
@example(("WAV", "PCM_16"), 96000, 1, 1 / 96000, 0.5)
@example(("FLAC", "PCM_24"), 4000, 4, 0.001, 0.5)
def test_any_rate_width_channels_and_length_reads_as_16khz_mono(tmp_path, kind, rate, channels,
                                                                seconds, level):
    container, subtype = kind
    if container == "FLAC" and rate > 65535:
        rate -= rate % 10  # FLAC's header holds a higher rate only in tens of Hz
    frames = int(seconds * rate)
    path = tmp_path / f"clip.{container.lower()}"
    soundfile.write(path, tone(frames, rate, channels, level), rate, subtype=subtype,
                    format=container)
    try:
        pcm = read_audio(path, 16000)
    except AudioFileError as error:
        assert frames == 0, error  # only a file with no audio in it is refused
        check_error(error, path)
        return
    assert frames > 0
    assert pcm.dtype == np.int16 and pcm.ndim == 1
    assert abs(len(pcm) - frames * 16000 / rate) <= 2
    if seconds >= 0.1:  # long enough for whole periods: the level comes through the mixdown
        # Away from the ends, where the resampler rings on the sine's abrupt cut (+13% seen).
        peak = np.abs(pcm[320:-320].astype(np.int32)).max() / FULL_SCALE
        assert abs(peak - level) <= 0.1 * level + 0.02


@PROPERTY
@given(RATES, st.lists(st.integers(-32768, 32767), max_size=3000))
def test_int16_written_and_read_at_its_own_rate_round_trips_exactly(tmp_path, rate, samples):
    pcm = np.array(samples, dtype=np.int16)
    path = tmp_path / "round.wav"
    write_wav(path, pcm, rate)
    try:
        back = read_audio(path, rate)
    except AudioFileError as error:
        assert not samples
        check_error(error, path)
        return
    assert back.dtype == np.int16 and np.array_equal(back, pcm)


@PROPERTY
@given(st.text(st.characters(blacklist_characters="/"), max_size=300)
       | st.sampled_from(["a" * 300, "x\x00y", "", ".", "..", "none/deeper.wav"]))
def test_any_file_name_gives_audio_or_the_audio_file_error(tmp_path, name):
    try:
        read_audio(tmp_path / name, 16000)
    except AudioFileError as error:
        assert "\n" not in str(error) or "\n" in name
    else:
        raise AssertionError("nothing is there to read")


def wav_header(format_tag: int, channels: int, rate: int, bits: int, data: bytes) -> bytes:
    """A RIFF/WAVE header whose fields may say anything, before `data`."""
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", format_tag, channels, rate, (rate * block) & 0xFFFFFFFF,
                      block & 0xFFFF, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + \
        struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


RATE_FIELDS = st.integers(0, 2 ** 32 - 1) | st.sampled_from([1, 2, 8000, 44100, 2 ** 31])
WAV_HEADERS = st.builds(  # any field may say anything
    wav_header, st.sampled_from([0, 1, 2, 3, 6, 7, 0x11, 0xFFFE]) | st.integers(0, 0xFFFF),
    st.integers(0, 8) | st.integers(0, 0xFFFF), RATE_FIELDS,
    st.sampled_from([0, 1, 8, 16, 24, 32, 64, 7, 12]), st.binary(max_size=400),
) | st.builds(  # plain PCM or float, which libsndfile reads at whatever rate it says
    wav_header, st.sampled_from([1, 3]), st.integers(1, 8), RATE_FIELDS,
    st.sampled_from([8, 16, 24, 32, 64]), st.binary(max_size=2000))


@PROPERTY
@given(st.binary(max_size=300) | WAV_HEADERS | st.binary(max_size=40).map(
    lambda junk: b"RIFF\x00\x00\x00\x00WAVE" + junk))
@example(b"")
@example(wav_header(1, 1, 1, 16, b"\x01\x00" * 40))
@example(wav_header(3, 1, 16000, 32, struct.pack("<4f", float("nan"), float("inf"), -1e30, 0.5)))
def test_any_bytes_as_a_wav_give_audio_or_the_audio_file_error(tmp_path, raw):
    path = tmp_path / "clip.wav"
    path.write_bytes(raw)
    try:
        pcm = read_audio(path, 16000)
    except AudioFileError as error:
        check_error(error, path)
        return
    assert pcm.dtype == np.int16 and pcm.ndim == 1


@PROPERTY
@given(FORMATS, st.integers(0, 4000), st.data())
def test_a_file_cut_short_gives_audio_or_the_audio_file_error(tmp_path, kind, frames, data):
    container, subtype = kind
    whole = tmp_path / f"whole.{container.lower()}"
    soundfile.write(whole, tone(frames, 16000, 2, 0.5), 16000, subtype=subtype,
                    format=container)
    raw = whole.read_bytes()
    path = tmp_path / f"cut.{container.lower()}"
    path.write_bytes(raw[:data.draw(st.integers(0, len(raw)), label="cut at")])
    try:
        pcm = read_audio(path, 16000)
    except AudioFileError as error:
        check_error(error, path)
        return
    assert pcm.dtype == np.int16 and pcm.ndim == 1 and len(pcm) <= frames


# -- the int16 conversion ------------------------------------------------------------------

DTYPES = st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                          np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
SHAPES = st.integers(0, 50).map(lambda n: (n,)) | st.tuples(st.integers(0, 50),
                                                           st.integers(1, 4))


@st.composite
def sample_arrays(draw) -> np.ndarray:
    dtype = np.dtype(draw(DTYPES))
    elements = None
    if dtype.kind == "f":
        # Beyond full scale, NaN and infinities included: what a broken file or filter gives.
        specials = [float("nan"), float("inf"), -float("inf"), 1.0, -1.0]
        elements = st.floats(width=dtype.itemsize * 8) | st.sampled_from(
            specials + ([1e6] if dtype.itemsize > 2 else []))
    return draw(hnp.arrays(dtype, draw(SHAPES), elements=elements))


def expected_int16(audio: np.ndarray) -> np.ndarray:
    """What a sample of any value means as int16: scaled, rounded, clipped; NaN is silence."""
    mono = audio.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in a mixdown is NaN
        if mono.ndim == 2:
            mono = mono.mean(axis=1)
        scaled = mono * (FULL_SCALE if audio.dtype.kind == "f" else 1.0)
    out = np.where(np.isnan(scaled), 0.0, np.clip(np.rint(np.nan_to_num(scaled)), -32768, 32767))
    return out.astype(np.int16)


@settings(max_examples=200, deadline=None, database=None)
@given(sample_arrays())
@example(np.array([np.nan, np.inf, -np.inf, 2.0, -2.0, 0.5], dtype=np.float32))
@example(np.array([[np.inf, -np.inf], [np.nan, 0.0]], dtype=np.float64))
@example(np.array([2 ** 63, 0], dtype=np.uint64))
def test_samples_of_any_value_convert_to_int16_in_range(audio):
    with warnings.catch_warnings():
        # A NaN cast to int16 is undefined (numpy warns "invalid value"): it must not happen,
        # and nothing else may print a warning on the terminal either.
        warnings.simplefilter("error")
        out = to_int16(audio)
    assert out.dtype == np.int16 and out.shape == (audio.shape[0],)
    if audio.ndim == 1 and audio.dtype == np.int16:
        assert np.array_equal(out, audio)
    assert np.array_equal(out, expected_int16(audio))
