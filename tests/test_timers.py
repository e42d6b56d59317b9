"""Timers on their own: going off on the background thread, pausing, changing, closing."""

import threading

import pytest

from assistant.timers import MAX_SECONDS, Timer, TimerError, Timers, cancelled_line
from tests.support.clocks import ManualClock


def test_the_background_thread_announces_a_timer_once_it_ends():
    finished: list[Timer] = []
    went_off = threading.Event()

    def on_finished(timer: Timer) -> None:
        finished.append(timer)
        went_off.set()

    timers = Timers(on_finished=on_finished)
    try:
        timers.start(1, "tea")
        # Generous: the point is that it goes off by itself, not how punctually.
        assert went_off.wait(15), "the timer never went off"
        assert [t.name for t in finished] == ["tea"] and finished[0].finished
        assert timers.running() == []
    finally:
        timers.close()


def test_a_paused_timer_does_not_go_off_and_resumes_with_what_was_left():
    clock = ManualClock()
    ended: list[Timer] = []
    timers = Timers(clock=clock, on_finished=ended.append, background=False)
    timer = timers.start(60)
    clock.now += 20
    timers.pause(timer)
    clock.now += 3600
    assert timers.run_due() == [] and ended == []
    assert timers.running()[0].left(clock()) == pytest.approx(40)
    timers.resume(timer)
    clock.now += 39
    assert timers.run_due() == []
    clock.now += 1
    assert timers.run_due() == [timer] and ended == [timer]


def test_several_timers_end_in_the_order_they_are_due():
    clock = ManualClock()
    timers = Timers(clock=clock, background=False)
    long = timers.start(300, "pasta")
    short = timers.start(60, "eggs")
    assert [t.name for t in timers.running()] == ["eggs", "pasta"]
    clock.now += 301
    assert timers.run_due() == [short, long]


def test_removing_at_least_the_time_left_finishes_it_now_without_a_ring():
    clock = ManualClock()
    ended: list[Timer] = []
    timers = Timers(clock=clock, on_finished=ended.append, background=False)
    timer = timers.start(120)
    paused = timers.start(60, "eggs")
    timers.pause(paused)
    clock.now += 20
    with pytest.raises(TimerError, match="24 hours"):
        timers.change(timer, MAX_SECONDS)
    assert timers.change(timer, -600) == pytest.approx(100)  # what was left
    assert timers.change(paused, -60) == pytest.approx(60)  # all of it, paused or not
    assert timer.finished and paused.finished and timers.running() == []
    # The answer to the request says it is done: no ring says it again.
    clock.now += 3600
    assert timers.run_due() == [] and ended == []


def test_removing_less_than_the_time_left_keeps_it_running():
    clock = ManualClock()
    timers = Timers(clock=clock, background=False)
    timer = timers.start(120)
    timers.change(timer, -119.5)
    assert not timer.finished and timers.running() == [timer]
    clock.now += 0.5
    assert timers.run_due() == [timer]


def test_closing_returns_the_running_timers_and_stops_the_thread():
    clock = ManualClock()
    timers = Timers(clock=clock)
    timers.start(3600)
    timers.start(90, "bread")
    left = timers.close()
    assert [t.name for t in left] == ["bread", ""]
    assert cancelled_line(left, clock()) == (
        "Cancelled the running timers: the 1 minute 30 second bread timer "
        "(1 minute and 30 seconds left) and the 1 hour timer (1 hour left).")
    assert timers._thread is not None and not timers._thread.is_alive()


@pytest.mark.parametrize("seconds", [0, -5, MAX_SECONDS + 1])
def test_a_duration_out_of_range_is_refused_with_a_sentence(seconds):
    timers = Timers(background=False)
    with pytest.raises(TimerError) as refused:
        timers.start(seconds)
    assert str(refused.value).endswith(".")
