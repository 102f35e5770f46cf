"""How much a process claims ahead of its run slots, and when it looks at the due work again.

Pure: each function takes the numbers it decides on (and `now`); the timer's claim paths
(`timer.claim_paths`) call them while holding the timer's lock.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

# Claims a process holds (`held_claims`): the runs it has slots for now, plus what its processes
# start within HELD_WAIT_S, up to CLAIM_AHEAD_MAX per run slot. A claim held waits for a slot while
# another process may be free, and the runs of a process that dies are retried only once it is seen
# dead: holding little strands little. Across tenants a pass costs about the same whatever it claims
# (the pick ranks the due rows; its reads and writes are a few statements for all its tenants), so
# short runs still claim many at a time.
CLAIM_AHEAD_MAX = 12
HELD_WAIT_S = 1.0
# Threads claiming at once in a process. A pass is mostly waiting on the database (a few statements
# per tenant it claims for); a second claimer overlaps those waits, as the runs of a task queue's
# several fetchers do. More add little on 2 cores and hold more connections.
CLAIMERS = 2
# How long a claimer waits after a pass that found due rows but every one locked by other claimers'
# passes. Those passes move the rows out of the due set as they commit, a few milliseconds on; looking
# again at once found nothing again: at the end of a burst, with 8 claimers over 4 processes, some 70
# empty picks in half a second, each ranking the rows still due (~12 ms of PostgreSQL a pick) while the
# last claims and records waited for a core. A claim that rolls back leaves its rows due: they wait this long.
LOCKED_OUT_WAIT_S = 0.05


def held_claims(avg_run_s: float | None, parallel: int, run_limit: int, ends_per_s: float | None = None) -> int:
    """The most claims a process holds: its run slots, and the runs its processes start within `HELD_WAIT_S`.

    `avg_run_s`: the runs' average time (None before the first has ended: then one run out and
    one waiting per process, whatever the runner's in-flight budget). The process starts
    `parallel / avg_run_s` runs a second, and no more than `ends_per_s`, the runs it has seen
    end a second lately (`EndRate`): a script's own time leaves out its hand-over and record,
    which bound a short script's pace. Refilled at half (`cross_room`), as db-scheduler
    fetches `limit - in_flight` once the queue drained to its lower limit.
    """
    parallel = max(1, parallel)
    if avg_run_s is None:
        return 2 * parallel
    soon = int(HELD_WAIT_S * parallel / max(avg_run_s, 1e-6))
    if ends_per_s is not None:
        soon = min(soon, int(HELD_WAIT_S * ends_per_s) + 1)
    return max(run_limit, min(CLAIM_AHEAD_MAX * run_limit, run_limit + soon))


class EndRate:
    """How many runs a second a process has seen end lately: over its last `WINDOW` runs, and at least `MIN_SPAN_S`.

    The recorder records what ended in batches, each told at one instant (`ended(at, runs)`): a
    batch's runs ended between the record before it and its own, so the rate is the runs recorded
    after the window's first record over the time from it to the last. Counted run by run, with
    their batch's instant, a window of `WINDOW` runs could lie within one or two batches and span
    nothing, or a fraction of the time those runs took.
    """

    WINDOW = 256
    MIN_SPAN_S = 0.5  # ends spanning less than this say nothing yet

    def __init__(self) -> None:
        self._records: deque[list[float]] = deque()  # [instant, runs], oldest first
        self._runs = 0  # in `_records`

    def ended(self, at: float, runs: int = 1) -> None:
        if runs <= 0:
            return
        if self._records and self._records[-1][0] >= at:  # the same record told run by run
            self._records[-1][1] += runs
        else:
            self._records.append([at, runs])
        self._runs += runs
        # The oldest record goes once the ones after its successor still cover the window.
        while (len(self._records) > 2 and self._runs - self._records[0][1] - self._records[1][1] >= self.WINDOW
               and at - self._records[1][0] >= self.MIN_SPAN_S):
            self._runs -= int(self._records.popleft()[1])

    def per_s(self) -> float | None:
        if len(self._records) < 2:
            return None
        span = self._records[-1][0] - self._records[0][0]
        return (self._runs - self._records[0][1]) / span if span >= self.MIN_SPAN_S else None


def next_look(full: bool, picked: int, next_due_at: datetime | None, now: datetime,
              idle: timedelta) -> tuple[datetime, bool]:
    """After a pass that picked `picked` due rows (`full`: as many as it asked for) and saw the
    earliest due time `next_due_at`: when to look at the index again,
    and whether a wake-up (a NOTIFY, a run that ended) may bring that look forward.

    A full pass looks again at once; one that found due rows but could lock none of them (other
    claimers hold them all) waits `LOCKED_OUT_WAIT_S` whatever wakes it, since those rows are being
    claimed; otherwise at the index's earliest due time, within `idle`.
    """
    if full:
        return now, True
    if picked == 0 and next_due_at is not None and next_due_at <= now:
        return now + timedelta(seconds=LOCKED_OUT_WAIT_S), False
    return (min(next_due_at, now + idle) if next_due_at is not None else now + idle), True


def cross_room(capacity: int, inflight: int, unrecorded: int) -> int:
    """How many runs the process may claim now across tenants; 0: wait for room.

    Claims and runs not yet ended stay within `capacity`, counting finished-but-unrecorded
    ones up to twice it (the recorder lingers to batch); a pass claims only once the
    unfinished work has drained to half, so that one transaction serves many runs.
    """
    unfinished = inflight - unrecorded
    if unfinished > capacity // 2:
        return 0
    return max(0, min(capacity - unfinished, 2 * capacity - inflight))
