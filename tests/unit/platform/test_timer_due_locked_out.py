"""A claimer that finds every due row locked by other claimers' passes waits, rather than picking again at once.

At the end of a burst over four processes (eight claimers), the last due rows were locked by
the passes claiming them; the others' picks found nothing, saw the index's earliest due time
in the past, and picked again at once, woken besides by every run that ended: some 70 empty
picks in half a second, each ranking the rows still due on PostgreSQL while the last claims
and records waited for a core.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from almanac.platform.clock import SystemClock
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.due_index.claim import DuePass
from almanac.platform.decisions.pacing import LOCKED_OUT_WAIT_S, next_look
from almanac.platform.timer.scheduler import across_tenants

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
IDLE = timedelta(seconds=5)


def _batch(picked: int, full: bool, next_due_at: datetime | None) -> DuePass:
    return DuePass([], picked, full, [], next_due_at, {} if not full else None)


def _look(batch: DuePass) -> tuple[datetime, bool]:
    return next_look(batch.full, batch.picked, batch.next_due_at, NOW, IDLE)


def test_a_full_pass_looks_again_at_once() -> None:
    assert _look(_batch(120, True, None)) == (NOW, True)


def test_a_pass_that_locked_nothing_of_what_is_due_waits_whatever_wakes_it() -> None:
    again, wakeable = _look(_batch(0, False, NOW - timedelta(seconds=3)))
    assert again == NOW + timedelta(seconds=LOCKED_OUT_WAIT_S) and not wakeable


def test_a_pass_that_claimed_some_or_found_nothing_due_looks_at_the_earliest_due_time() -> None:
    soon = NOW + timedelta(seconds=2)
    assert _look(_batch(7, False, NOW - timedelta(seconds=1))) == (NOW - timedelta(seconds=1), True)
    assert _look(_batch(0, False, soon)) == (soon, True)
    assert _look(_batch(0, False, NOW + timedelta(hours=1))) == (NOW + IDLE, True)
    assert _look(_batch(0, False, None)) == (NOW + IDLE, True)


class LockedOut:
    """A store whose index has rows due a second ago, every one locked by another process's pass."""

    def __init__(self) -> None:
        self.passes = 0

    def claim_across(self, now: datetime, limit: int, **_: Any) -> DuePass:
        self.passes += 1
        return _batch(0, False, now - timedelta(seconds=1))


def test_the_claim_loop_does_not_spin_on_rows_that_others_are_claiming() -> None:
    store = LockedOut()
    timer = across_tenants(store, FunctionRunner(lambda *a: None), SystemClock(), lambda: [], workers=4, index=store)
    timer._runner_ready.set()
    loop = threading.Thread(target=timer._claim_loop, args=(False,), daemon=True)
    woken = threading.Event()

    def wake_as_runs_end() -> None:  # the other claims' runs ending, each a wake-up
        while not woken.is_set():
            timer.wake("")
            time.sleep(0.001)

    waker = threading.Thread(target=wake_as_runs_end, daemon=True)
    loop.start()
    waker.start()
    time.sleep(0.5)
    woken.set()
    with timer._cond:
        timer._stopping = True
        timer._cond.notify_all()
    loop.join(5)
    waker.join(5)
    assert not loop.is_alive()
    # 0.5 s of LOCKED_OUT_WAIT_S waits is 10 passes; the loop before made thousands.
    assert 1 <= store.passes <= 0.5 / LOCKED_OUT_WAIT_S + 5
