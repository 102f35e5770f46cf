"""The epoch ticker only runs while runs are in flight, and deadlines hold across its pauses."""

import time

from almanac.sandbox import Limits, NullCapabilities, _engine

BUSY = "export default () => { while (true) {} }"


def _wait_parked(ticker, within: float) -> bool:
    stop = time.monotonic() + within
    while time.monotonic() < stop:
        if not ticker.active:
            return True
        time.sleep(0.02)
    return False


def test_idle_ticker_parks_and_a_busy_loop_still_times_out_after_it(sandbox):
    ticker = sandbox._shared.ticker
    assert sandbox.run("export default () => 1", {}, Limits(), NullCapabilities()).output == 1
    assert _wait_parked(ticker, _engine.IDLE_S + 2)
    epoch = ticker.epoch
    time.sleep(0.05)
    assert ticker.epoch == epoch  # parked: no ticks, no wake-ups

    started = time.monotonic()
    result = sandbox.run(BUSY, {}, Limits(timeout_ms=100), NullCapabilities())
    elapsed_ms = (time.monotonic() - started) * 1000
    assert result.status == "timed_out"
    assert 100 <= elapsed_ms < 100 + 250
    assert ticker.epoch > epoch


def test_deadline_in_ticks_counts_from_now_after_a_pause(sandbox):
    ticker = sandbox._shared.ticker
    assert _wait_parked(ticker, _engine.IDLE_S + 2)
    ticks = ticker.begin(time.monotonic() + 0.2)
    try:
        assert abs(ticks - 0.2 / _engine.TICK_S) <= 2
    finally:
        ticker.end()
