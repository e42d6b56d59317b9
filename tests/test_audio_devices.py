"""The device edge of `audio/`: real capture and playback through sounddevice/PortAudio,
against a private PulseAudio daemon (tests/support/sound_server.py), plus the in-memory speaker.

PortAudio scans devices once, at import or `rescan_devices()`, and libpulse reads
PULSE_SERVER when a stream opens: the `server` fixture points this process's environment at
the private daemon and then rescans, so it works whichever test imported sounddevice first.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from audio.capture import DeviceLost, Microphone
from audio.devices import (
    AudioDeviceError,
    DeviceInfo,
    find_device,
    format_device_table,
    list_devices,
    load_sounddevice,
    rescan_devices,
)
from audio.echo import FarEnd
from audio.errors import AudioError
from audio.memory_out import MemorySpeaker
from audio.playback import Speaker
from tests.support.clips import tone
from tests.support.clocks import HUNG_S, ManualClock, SteppedClock, wait_until
from tests.support.sound_server import MIC_RATE, SoundServer, running_sound_server

LOUD = 1000.0
"""Mean absolute amplitude of a 10 ms window that counts as sound (the tone is ~6,000)."""


def loud_windows(pcm: np.ndarray, rate: int) -> np.ndarray:
    """Indices of the loud 10 ms windows."""
    win = rate // 100
    frames = pcm[: len(pcm) // win * win].astype(np.float64).reshape(-1, win)
    return np.nonzero(np.abs(frames).mean(axis=1) > LOUD)[0]


def peak_frequency(pcm: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(pcm.astype(np.float64), n=8 * len(pcm)))
    return float(np.fft.rfftfreq(8 * len(pcm), 1 / rate)[spectrum.argmax()])


# -- the real sound server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[SoundServer]:
    with running_sound_server() as srv:
        try:
            with pytest.MonkeyPatch.context() as mp:
                for name, value in srv.env.items():
                    mp.setenv(name, value)
                try:
                    rescan_devices()
                except AudioDeviceError as exc:  # PortAudio missing: its message says what to do
                    pytest.skip(str(exc))
                yield srv
        finally:
            if "sounddevice" in sys.modules:
                rescan_devices()  # later tests see this process's own sound setup again


@pytest.fixture(scope="module")
def pulse(server: SoundServer) -> int:
    index = find_device("pulse", "input")
    assert index is not None
    return index


def read_seconds(mic: Microphone, seconds: float) -> np.ndarray:
    blocks = []
    for _ in range(round(seconds * 1000 / mic.block_ms)):
        block = mic.read(timeout=HUNG_S)
        assert block is not None, f"the microphone delivered nothing for {HUNG_S:g} s"
        assert block.dtype == np.int16 and len(block) == mic.block
        blocks.append(block)
    return np.concatenate(blocks)


def drain(mic: Microphone) -> int:
    """Read what is already captured; how many samples that was."""
    count = 0
    while (block := mic.read(timeout=0.0)) is not None:
        count += len(block)
    return count


def read_until_quiet_after_sound(mic: Microphone, quiet_s: float = 0.2,
                                 most_s: float = 30.0) -> np.ndarray:
    """Capture until a sound has come and `quiet_s` of quiet followed it: however late the
    sound arrives, all of it is in what is returned (at most `most_s` of audio)."""
    heard = np.zeros(0, dtype=np.int16)
    while len(heard) < most_s * MIC_RATE:
        heard = np.concatenate([heard, read_seconds(mic, 0.1)])
        loud = loud_windows(heard, MIC_RATE)
        if len(loud) and len(heard) // 160 - (loud[-1] + 1) >= quiet_s * 100:
            return heard
    raise AssertionError(f"no sound followed by {quiet_s:g} s of quiet in {most_s:g} s of audio")


def assert_hears_tone(server: SoundServer, mic: Microphone) -> None:
    """Feed 0.3 s silence + 0.5 s of 440 Hz and find it as it was fed: after the silence,
    whole, without a gap, at its pitch. Counted in samples captured, not in time taken."""
    read_seconds(mic, 0.2)  # the stream is running
    drain(mic)  # what is read next was captured from now on
    server.feed(np.concatenate([np.zeros(int(0.3 * MIC_RATE), np.int16), tone(0.5)]))
    heard = read_until_quiet_after_sound(mic)
    loud = loud_windows(heard, MIC_RATE)
    # The fed silence comes first; whatever was still in the pipe, PulseAudio and PortAudio
    # when it was fed comes before it too, so only a lower bound holds on any machine.
    assert loud[0] / 100 >= 0.29, loud[0] / 100
    assert 0.46 <= (loud[-1] - loud[0] + 1) / 100 <= 0.54
    assert len(loud) == loud[-1] - loud[0] + 1, "the tone has gaps"
    burst = heard[(loud[0] + 2) * 160 : (loud[-1] - 1) * 160]
    assert peak_frequency(burst, MIC_RATE) == pytest.approx(440, abs=3)


def wait_for_monitor(rec, quiet_s: float = 0.2) -> np.ndarray:
    """What the monitor recorded, once it holds sound followed by `quiet_s` of quiet: the
    monitor lags the sink by parec's latency, more on a busy machine."""
    deadline = time.monotonic() + HUNG_S
    while time.monotonic() < deadline:
        played = rec.samples
        loud = loud_windows(played, MIC_RATE)
        if len(loud) and len(played) // 160 - (loud[-1] + 1) >= quiet_s * 100:
            return rec.stop()
        time.sleep(0.05)
    raise AssertionError("the monitor never recorded the sound and the quiet after it")


def window_pitches(pcm: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """The strongest frequency of each 10 ms window (to 10 Hz, enough to tell tones apart)."""
    return np.array([peak_frequency(pcm[w * 160 : (w + 1) * 160], MIC_RATE) for w in windows])


def test_lists_and_finds_the_sound_server_devices(server: SoundServer, pulse: int) -> None:
    devices = list_devices()
    names = [dev.name for dev in devices]
    assert "pulse" in names and "default" in names
    assert any(dev.is_default_input for dev in devices)
    assert any(dev.is_default_output for dev in devices)
    by_index = {dev.index: dev for dev in devices}
    assert by_index[pulse].name == "pulse" and by_index[pulse].input_channels > 0
    assert find_device("PULS", "output") == pulse
    assert find_device(pulse, "input") == find_device(str(pulse), "input") == pulse
    assert find_device(None, "input") is None  # the system default
    with pytest.raises(AudioDeviceError) as err:
        find_device("nonexistent", "input")
    assert "nonexistent" in str(err.value)
    assert "pulse" in str(err.value) and "default" in str(err.value)
    assert "pulse" in format_device_table(devices)


@pytest.mark.parametrize("device_rate", [None, 44100], ids=["16k", "44k-resampled"])
def test_microphone_reads_the_fed_tone(
    server: SoundServer, pulse: int, device_rate: int | None
) -> None:
    with Microphone(pulse, device_rate=device_rate) as mic:
        assert_hears_tone(server, mic)
        assert mic.overflows == 0


@pytest.mark.parametrize("device_rate", [None, 48000], ids=["native", "48k-resampled"])
def test_speaker_plays_to_the_sink(server: SoundServer, pulse: int, device_rate: int | None):
    rate = 22050  # Piper's
    rec = server.record_monitor()
    speaker = Speaker(pulse, device_rate=device_rate)
    try:
        speaker.play(tone(0.6, rate), rate)
        speaker.play(tone(0.4, rate), rate)
        assert speaker.speaking
        assert speaker.wait(timeout=HUNG_S)
        assert not speaker.speaking
        assert speaker.played_seconds == pytest.approx(1.0, abs=0.01)
        played = wait_for_monitor(rec)
    finally:
        rec.stop()
        speaker.close()
    loud = loud_windows(played, MIC_RATE)
    assert len(loud) > 0, "nothing reached spk.monitor"
    assert (loud[-1] - loud[0] + 1) / 100 == pytest.approx(1.0, abs=0.06)
    assert len(loud) >= 95, "the two chunks were not played back to back"
    burst = played[(loud[0] + 2) * 160 : (loud[-1] - 1) * 160]
    assert peak_frequency(burst, MIC_RATE) == pytest.approx(440, abs=3)


def test_speaker_stop_cuts_a_sentence_short(server: SoundServer, pulse: int) -> None:
    rate = 22050
    rec = server.record_monitor()
    speaker = Speaker(pulse)
    try:
        speaker.play(tone(10.0, rate, 440), rate)  # a long sentence…
        speaker.play(tone(1.0, rate, 660), rate)  # …and the next one, queued
        # well into the first sentence, however slow
        wait_until(lambda: speaker.played_seconds >= 0.8, "the speaker played 0.8 s")
        speaker.stop()
        stopped_at = speaker.played_seconds
        assert not speaker.speaking
        time.sleep(0.5)  # a gap on the monitor between the two bursts (only that)
        speaker.reset_counter()
        speaker.play(tone(0.2, rate, 880), rate)  # it plays again after a stop
        assert speaker.wait(timeout=HUNG_S)
        assert speaker.played_seconds == pytest.approx(0.2, abs=0.01)
        recorded = wait_for_monitor(rec)
    finally:
        rec.stop()
        speaker.close()
    # Cut mid-sentence: 0.8 s were written, less what the device buffer still held
    # (dropped, never heard, not counted); far less than the 10 s sentence.
    assert 0.5 < stopped_at < 9.0
    loud = loud_windows(recorded, MIC_RATE)
    pitches = window_pitches(recorded, loud)
    first = loud[np.abs(pitches - 440) < 60]
    queued = loud[np.abs(pitches - 660) < 60]
    again = loud[np.abs(pitches - 880) < 60]
    # What reached the sink is what the speaker counted as played, in samples...
    assert len(first) / 100 == pytest.approx(stopped_at, abs=0.06)
    # ...the sentence queued behind it never played, and the next play came after the stop.
    assert len(queued) == 0
    assert len(again) / 100 == pytest.approx(0.2, abs=0.04)
    assert first[-1] < again[0]


def test_speaker_with_an_echo_canceller_never_stops_its_stream(server: SoundServer,
                                                               pulse: int) -> None:
    """Silence flows between replies (each restart moved the echo by tens of ms), and a
    stop still silences a sentence within the device's buffer."""
    rate = 22050
    far = FarEnd()
    rec = server.record_monitor()
    speaker = Speaker(pulse, far_end=far)
    try:
        speaker.play(tone(0.3, rate), rate)
        assert speaker.wait(timeout=HUNG_S)
        before = far.pushed
        time.sleep(1.0)
        idle = (far.pushed - before) / MIC_RATE
        speaker.play(tone(10.0, rate, 660), rate)
        wait_until(lambda: speaker.played_seconds >= 0.8, "the speaker played 0.8 s")
        speaker.stop()
        assert not speaker.speaking
        stopped_at = speaker.played_seconds
        time.sleep(1.0)
        recorded = wait_for_monitor(rec)
    finally:
        rec.stop()
        speaker.close()
    assert idle == pytest.approx(1.0, abs=0.3), "no silence flowed between the replies"
    loud = loud_windows(recorded, MIC_RATE)
    cut = loud[np.abs(window_pitches(recorded, loud) - 660) < 60]
    # What was written plays out (the device's buffer is not thrown away), then nothing.
    assert stopped_at - 0.3 < len(cut) / 100 < stopped_at + 0.3
    assert stopped_at < 2.0


def read_until_lost(mic: Microphone, within: float) -> float:
    """Seconds until `read` raised DeviceLost; fails the test if it did not in time."""
    started = time.monotonic()
    with pytest.raises(DeviceLost):
        while time.monotonic() - started < within:
            mic.read(timeout=0.1)
    return time.monotonic() - started


def test_unplugged_default_source_is_rerouted_by_the_sound_server(
    server: SoundServer, pulse: int
) -> None:
    """Through PulseAudio (or PipeWire) the stream is not lost when its source goes: the
    server moves it to the fallback source, and back when the source returns as default."""
    rec = server.record_monitor()  # keeps the fallback, spk.monitor, delivering steadily
    mic = Microphone(pulse)
    mic.start()
    try:
        read_seconds(mic, 0.2)
        server.unload_mic()
        read_seconds(mic, 1.0)  # no DeviceLost: audio (silence) keeps coming
        server.load_mic()
        assert_hears_tone(server, mic)  # no reopen() needed
    finally:
        rec.stop()
        mic.close()
        if server.mic_module is None:
            server.load_mic()


def test_microphone_that_stops_delivering_is_lost_then_reopened(
    server: SoundServer, pulse: int
) -> None:
    mic = Microphone(pulse, stall_timeout=0.5)
    mic.start()
    try:
        read_seconds(mic, 0.2)
        server.suspend_mic()  # connected, "active", but silent: as a hung device
        assert read_until_lost(mic, within=3.0) < 1.5
        with pytest.raises(DeviceLost):
            mic.read(timeout=0.1)  # stays lost until reopened
        server.suspend_mic(False)
        mic.reopen()
        assert_hears_tone(server, mic)
    finally:
        mic.close()
        server.suspend_mic(False)


def test_microphone_lost_when_the_server_dies_and_back_when_it_returns(
    server: SoundServer, pulse: int
) -> None:
    mic = Microphone(pulse)
    mic.start()
    try:
        read_seconds(mic, 0.2)
        server.kill()
        assert read_until_lost(mic, within=3.0) < 1.0  # the stream stops: found at once
        with pytest.raises(DeviceLost, match="microphone"):
            mic.reopen()  # nothing to connect to yet
        server.restart()
        mic.reopen()
        assert_hears_tone(server, mic)
    finally:
        mic.close()


# -- without a sound server ---------------------------------------------------------------


def _devices(*specs: tuple[str, int, int]) -> list[DeviceInfo]:
    return [
        DeviceInfo(index, name, ins, outs, 48000.0, is_default_input=index == 0 and ins > 0,
                   is_default_output=index == 0 and outs > 0, hostapi="ALSA")
        for index, (name, ins, outs) in enumerate(specs)
    ]


def test_find_device_by_index_or_part_of_the_name() -> None:
    devices = _devices(("HDA Intel PCH: ALC Analog (hw:0,0)", 2, 2),
                       ("USB Mic (hw:1,0)", 1, 0), ("USB", 1, 0), ("HDMI 0", 0, 8))
    assert find_device("usb mic", "input", devices) == 1
    assert find_device("usb", "input", devices) == 2  # an exact name wins
    assert find_device("Analog", "input", devices) == 0
    assert find_device(3, "output", devices) == 3
    assert find_device("1", "input", devices) == 1
    assert find_device(None, "input", devices) is None
    with pytest.raises(AudioDeviceError, match="No input device 3"):
        find_device(3, "input", devices)  # HDMI has no input
    with pytest.raises(AudioDeviceError, match="USB Mic") as err:
        find_device("webcam", "input", devices)
    assert "HDMI" not in str(err.value)  # only devices that could be used are listed


def test_no_input_device_at_all_says_what_to_do() -> None:
    with pytest.raises(AudioDeviceError, match="No microphone") as err:
        find_device(None, "input", _devices(("HDMI 0", 0, 8)))
    assert "HDMI 0" in str(err.value) and err.value.stage == "audio"
    assert isinstance(err.value, AudioError)
    assert "No sound devices" in format_device_table([])


def test_missing_portaudio_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoPortAudio(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "sounddevice":  # what sounddevice raises when libportaudio is absent
                raise OSError("PortAudio library not found")
            return None

    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NoPortAudio(), *sys.meta_path])
    with pytest.raises(AudioDeviceError, match="sudo apt install libportaudio2"):
        load_sounddevice()


def test_memory_speaker_instant() -> None:
    speaker = MemorySpeaker()
    speaker.play(tone(1.0), MIC_RATE)
    speaker.play(tone(0.5, 22050), 22050)
    assert not speaker.speaking and speaker.wait(timeout=0)
    assert speaker.played_seconds == pytest.approx(1.5)
    assert [(len(pcm), rate) for pcm, rate in speaker.chunks] == [(16000, 16000), (11025, 22050)]
    speaker.reset_counter()
    assert speaker.played_seconds == 0


def test_memory_speaker_realtime_stop_keeps_only_what_played() -> None:
    clock = ManualClock()
    speaker = MemorySpeaker(realtime=True, clock=clock)
    speaker.play(tone(1.0), MIC_RATE)
    speaker.play(tone(0.5), MIC_RATE)
    assert speaker.speaking and speaker.played_seconds == 0
    clock.now += 1.25
    assert speaker.played_seconds == pytest.approx(1.25)
    assert [len(pcm) for pcm, _ in speaker.chunks] == [16000, 4000]
    speaker.stop()
    clock.now += 5
    assert not speaker.speaking
    assert speaker.played_seconds == pytest.approx(1.25)
    assert [len(pcm) for pcm, _ in speaker.chunks] == [16000, 4000]
    speaker.reset_counter()
    speaker.play(tone(0.3), MIC_RATE)  # after a gap it starts now, not at the old end
    clock.now += 0.1
    assert speaker.played_seconds == pytest.approx(0.1)


def test_memory_speaker_for_replay_lets_go_of_audio_already_played() -> None:
    # A long replay must not keep every reply's audio; the counts stay right.
    clock = ManualClock()
    speaker = MemorySpeaker(realtime=True, clock=clock, keep_chunks=False)
    speaker.play(tone(1.0), MIC_RATE)
    clock.now += 2
    speaker.reset_counter()  # the next reply starts
    speaker.play(tone(0.5), MIC_RATE)
    speaker.play(tone(0.5), MIC_RATE)
    clock.now += 0.75
    assert [len(pcm) for pcm, _ in speaker.chunks] == [8000, 4000]
    assert speaker.played_seconds == pytest.approx(0.75)
    speaker.reset_counter()  # one still playing is kept until it has played
    assert [len(pcm) for pcm, _ in speaker.chunks] == [4000]
    clock.now += 1
    assert speaker.played_seconds == pytest.approx(0.25)


def test_memory_speaker_wait_advances_with_the_clock() -> None:
    clock = ManualClock()
    speaker = MemorySpeaker(realtime=True, clock=clock)
    speaker.play(tone(0.5), MIC_RATE)
    speaker.play(tone(0.25), MIC_RATE)
    assert not speaker.wait(timeout=0.2)
    assert clock.now - 1000 == pytest.approx(0.2)
    assert speaker.wait()
    assert clock.now - 1000 == pytest.approx(0.75)
    assert not speaker.speaking and speaker.played_seconds == pytest.approx(0.75)


def test_memory_speaker_stop_from_another_thread_ends_wait() -> None:
    clock = SteppedClock()
    speaker = MemorySpeaker(realtime=True, clock=clock)
    speaker.play(tone(2.0), MIC_RATE)
    finished: list[bool] = []

    def waiter() -> None:
        done = speaker.wait()  # no timeout: only the stop can end it before 2 s
        with clock.changed:
            finished.append(done)
            clock.changed.notify_all()

    threading.Thread(target=waiter, daemon=True).start()
    clock.allow(5)
    clock.until(lambda: clock.sleeps == 6)  # six 20 ms steps into the wait, asleep
    speaker.stop()  # from this thread
    clock.allow(6)
    # The waiter's next look at the playhead ends the wait; it does not sleep again.
    clock.until(lambda: finished or clock.sleeps > 6)
    assert finished == [True] and clock.sleeps == 6
    assert speaker.played_seconds == pytest.approx(0.12)
    assert not speaker.speaking
