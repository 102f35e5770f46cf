"""The deadline watcher moves the epoch only when a run's deadline passes, and
stops exactly the runs that are past theirs."""

import math
import threading
import time

from almanac.sandbox import Limits, NullCapabilities

BUSY = "export default () => { while (true) {} }"
# Busy (no host call inside the loop but Date.now) for `ms`, then returns.
BUSY_FOR = "export default (e) => { const end = Date.now() + e.ms; let n = 0; while (Date.now() < end) n++; return 'done'; }"


def _wait_until(predicate, within: float) -> bool:
    stop = time.monotonic() + within
    while time.monotonic() < stop:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_runs_that_end_in_time_never_move_the_epoch(sandbox):
    watcher = sandbox._shared.deadlines
    moves = watcher.moves
    for n in range(20):
        assert sandbox.run("export default (e) => e.n", {"n": n}, Limits(), NullCapabilities()).output == n
    assert watcher.moves == moves


def test_the_watcher_sleeps_without_a_deadline_once_runs_are_over(sandbox):
    watcher = sandbox._shared.deadlines
    sandbox.run("export default () => 1", {}, Limits(timeout_ms=200), NullCapabilities())
    # It looks once more at the deadline it slept towards, then waits for the next run.
    assert _wait_until(lambda: watcher.wake_at == math.inf and not watcher.waiting, 2 + 0.5)


def test_a_busy_loop_is_stopped_at_its_deadline(sandbox):
    watcher = sandbox._shared.deadlines
    moves = watcher.moves
    started = time.monotonic()
    result = sandbox.run(BUSY, {}, Limits(timeout_ms=100), NullCapabilities())
    elapsed_ms = (time.monotonic() - started) * 1000
    assert result.status == "timed_out"
    assert 100 <= elapsed_ms < 100 + 1500  # generous: the precision is the bench's overshoot row
    assert watcher.moves > moves


def test_a_deadline_stops_only_the_run_past_it(sandbox):
    """Two runs in flight: the epoch moves for the short one; the long one goes on and finishes."""
    results = {}

    def long_run() -> None:
        results["long"] = sandbox.run(BUSY_FOR, {"ms": 600}, Limits(timeout_ms=5000), NullCapabilities())

    thread = threading.Thread(target=long_run)
    thread.start()
    results["short"] = sandbox.run(BUSY, {}, Limits(timeout_ms=150), NullCapabilities())
    thread.join(10)
    assert results["short"].status == "timed_out"
    assert results["long"].status == "succeeded", results["long"]
    assert results["long"].output == "done"


def test_a_shorter_deadline_wakes_a_watcher_sleeping_towards_a_later_one(sandbox):
    results = {}

    def slow_run() -> None:  # a long deadline the watcher sleeps towards
        results["slow"] = sandbox.run(BUSY_FOR, {"ms": 800}, Limits(timeout_ms=10_000), NullCapabilities())

    thread = threading.Thread(target=slow_run)
    thread.start()
    time.sleep(0.1)
    started = time.monotonic()
    results["busy"] = sandbox.run(BUSY, {}, Limits(timeout_ms=100), NullCapabilities())
    elapsed_ms = (time.monotonic() - started) * 1000
    thread.join(15)
    assert results["busy"].status == "timed_out"
    assert elapsed_ms < 100 + 1500  # far from the 10 s deadline the watcher slept towards
    assert results["slow"].status == "succeeded"
