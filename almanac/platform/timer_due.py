"""The timer on PostgreSQL: one claim across every tenant per pass, from the shared due index.

Same run slots, fair queue, lease renewal and recorder as `timer.Scheduler`; only
finding and claiming work differs. The per-tenant timer keeps a wake time per
tenant and claims tenant by tenant (each a transaction, the idle ones too); this
one asks the store for up to its free room of due work of any tenant in one
transaction (`SqlStore.claim_across`), fairly between tenants, and sleeps until
the index's earliest due time, a wake-up (a NOTIFY, a finished run), or room
coming back. It needs no tenant list and no tenant leases: every process claims
from the same index, `FOR UPDATE SKIP LOCKED`, so a process that dies leaves its
due work to the next pass of the others, and only its running attempts wait for
their leases.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from almanac.platform import policies
from almanac.platform.liveness import TAKEN_OVER
from almanac.platform.store_due import CrossBatch
from almanac.platform.timer import Scheduler

log = logging.getLogger("almanac.scheduler")

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


def next_look(batch: CrossBatch, now: datetime, idle: timedelta) -> tuple[datetime, bool]:
    """After a pass that claimed `batch`: when to look at the index again,
    and whether a wake-up (a NOTIFY, a run that ended) may bring that look forward.

    A full pass looks again at once; one that found due rows but could lock none of them (other
    claimers hold them all) waits `LOCKED_OUT_WAIT_S` whatever wakes it, since those rows are being
    claimed; otherwise at the index's earliest due time, within `idle`.
    """
    if batch.full:
        return now, True
    if batch.picked == 0 and batch.next_due_at is not None and batch.next_due_at <= now:
        return now + timedelta(seconds=LOCKED_OUT_WAIT_S), False
    return (min(batch.next_due_at, now + idle) if batch.next_due_at is not None else now + idle), True


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


class CrossTenantScheduler(Scheduler):
    """`Scheduler` whose passes claim across tenants (`store.claim_across`); PostgreSQL only."""

    def __init__(self, *args: Any, tenant_exists: Callable[[str], bool] | None = None,
                 claim_ahead: int | None = None, claimers: int = CLAIMERS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claimers = max(1, claimers)
        self._runner_ready = threading.Event()  # the other claimers wait for the runner, as the first does
        self._more_claimers: list[threading.Thread] = []
        self.tenant_exists = tenant_exists
        self.claim_ahead = claim_ahead  # claims held per run slot; None: `held_claims(...)` of the runs' average time
        self._woken = False
        self._taken_over = False  # a dead process's runs were made due: the next pass claims without room
        self._room_wanted = False  # a pass found no room: a run that ends wakes the loop
        self._renewer: threading.Thread | None = None
        # Lease ends as last renewed, by (tenant, run id); a claim not in it holds its claimed one.
        self._held_until: dict[tuple[str, int], datetime] = {}
        self._end_rate = EndRate()  # what this process really runs a second: how much it holds (`held_claims`)

    def start(self) -> None:
        """The timer, the recorder, and a thread of its own renewing leases.

        Renewal does not wait for the loop: a pass across many tenants on a busy database may
        take longer than a lease, and a claim waiting for its slot must not look dead meanwhile.
        """
        if self._thread is not None:
            return
        super().start()
        self._renewer = threading.Thread(target=self._renew_loop, name="almanac-renew", daemon=True)
        self._renewer.start()
        self._more_claimers = [threading.Thread(target=self._claim_loop, name=f"almanac-timer-{n}", daemon=True)
                               for n in range(1, self.claimers)]
        for thread in self._more_claimers:
            thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:  # no claimer may add claims once the drain below has begun
            self._stopping = True
            self._cond.notify_all()
        self._runner_ready.set()
        for thread in self._more_claimers:
            thread.join(timeout)
        self._more_claimers = []
        super().stop(timeout)  # every claimed run ran and was recorded: nothing is left to renew
        if self._renewer is not None:
            with self._cond:
                self._cond.notify_all()
            self._renewer.join(timeout)
            self._renewer = None

    def _renew_loop(self) -> None:
        every = self.renew_every.total_seconds()
        while True:
            with self._cond:
                # The condition is notified at every run's end and every pass: waking on it renewed
                # every held lease (a statement per tenant) many times a second under a burst.
                due = time.monotonic() + every
                while not self._done_renewing() and (left := due - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._done_renewing():
                    return
            try:
                self.renew_leases()
            except Exception:
                log.exception("run.lease_renewal_failed", extra={"event": "run.lease_renewal_failed"})

    def _done_renewing(self) -> bool:
        """(Holding the condition.) Stopping, and nothing is left whose lease would need renewing."""
        return self._stopping and not self._claims and self._recorder is None

    @property
    def capacity(self) -> int:
        if self.claim_ahead:
            return self.claim_ahead * self.run_limit
        return held_claims(self._avg_run_s, self.parallel, self.run_limit, self._end_rate.per_s())

    def wake(self, tenant: str) -> None:
        """Something changed (a schedule, a job, a finished run, a dead process reaped): look at the index now."""
        with self._cond:
            self._taken_over = self._taken_over or tenant == TAKEN_OVER
            self._woken = True
            self._cond.notify_all()

    def _wake_starved(self) -> None:
        """(Holding the condition.) A pass that found no room is retried once room comes back."""
        if self._room_wanted and cross_room(self.capacity, self._inflight, self._unrecorded) > 0:
            self._room_wanted = False
            self._woken = True
            self._cond.notify_all()

    def _record_done(self, done: list[Any]) -> None:
        """Record the finished runs of every tenant, a transaction per lane (`store.finish_across`).

        Runs that transaction did not record (an attempt had lost its lease, so it rolled back),
        or all of them when it failed, are recorded again the per-tenant way
        (`Scheduler._record_done`: fenced one by one, then each alone).
        """
        if not done:
            return
        self._end_rate.ended(time.monotonic(), len(done))
        try:
            applied = self.store.finish_across([(d.claim, d.result, d.started, d.finished_at) for d in done])
        except Exception:
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(done)})
            applied = None
        if applied is None:
            super()._record_done(done)
            return
        again = [d for d, ok in zip(done, applied) if ok is None]
        done = [d for d, ok in zip(done, applied) if ok is not None]
        applied = [ok for ok in applied if ok is not None]
        if again:
            super()._record_done(again)
        wake = False
        try:
            for d, ok in zip(done, applied):
                wake = self._after_record(d, ok) or wake
        finally:  # the slots come back whatever happened
            self._release([d.claim for d in done])
        if wake:
            self._wake_soon("")  # one look at the whole index

    def renew_leases(self, now: datetime | None = None) -> int:
        """Extend the held claims' leases in one transaction across tenants; how many were lost.

        As `Scheduler.renew_leases` (a claim lost before it started is dropped from the queue),
        but without a transaction per tenant: with hundreds of tenants in flight those took
        longer than the leases they renewed. Only the leases claimed or renewed a round ago or
        more (`policies.renewal_due`): a claim of the last moment is most often recorded before
        the next round, and renewing it was a statement that waited on rows others held.
        """
        now = now or self.clock.now()
        margin = getattr(self.store, "lease_margin_s", policies.LEASE_MARGIN_S)
        with self._cond:
            self._held_until = {key: at for key, at in self._held_until.items() if key in self._claims}
            claims = [c for key, c in self._claims.items() if c.occurrence_id is not None and policies.renewal_due(
                self._held_until.get(key, c.lease_until), now, c.timeout_ms, margin, self.renew_every)]
        if not claims:
            return 0
        try:
            gone = self.store.renew_across(claims, now)
        except Exception:
            log.exception("run.lease_renewal_failed", extra={"event": "run.lease_renewal_failed"})
            return 0
        by_tenant: dict[str, set[int]] = {}
        with self._cond:  # a run recorded since the snapshot is neither renewed nor lost
            for c in claims:
                key = (c.tenant, c.run_id)
                if key not in self._claims:
                    continue
                if key in gone:
                    by_tenant.setdefault(c.tenant, set()).add(c.run_id)
                else:
                    self._held_until[key] = policies.lease_until(now, c.timeout_ms, margin)
        for tenant, lost in by_tenant.items():
            with self._cond:
                dropped = self._fair.remove(tenant, lost)
                self._unfinished_by[tenant] -= len(dropped)
            if dropped:
                self._release(dropped, recorded=False)
            log.warning("run.lease_lost", extra={"event": "run.lease_lost", "tenant": tenant, "runs": len(lost)})
        return sum(len(v) for v in by_tenant.values())

    def _loop(self) -> None:
        self._prepare_runner()
        self._runner_ready.set()
        self._claim_loop()

    def _claim_loop(self) -> None:
        self._runner_ready.wait()
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._woken = False
            now = self.clock.now()
            again, wakeable = self._pass_safely(now)
            with self._cond:
                if self._stopping:
                    return
                if self._woken and wakeable:
                    continue
                delay = (min(again, now + self.idle) - self.clock.now()).total_seconds()
                if wakeable:
                    if delay > 0:
                        self._cond.wait(delay)
                else:  # notified at every run's end: only stopping may cut this wait short
                    self._cond.wait_for(lambda: self._stopping, max(0.0, delay))

    def _pass_safely(self, now: datetime) -> tuple[datetime, bool]:
        try:
            return self._pass(now)
        except Exception:
            log.exception("scheduler.claim_failed", extra={"event": "scheduler.claim_failed"})
            return now + timedelta(seconds=1), True

    def _pass(self, now: datetime) -> tuple[datetime, bool]:
        """Claim what is due across tenants, within the free room; when to look again (`next_look`)."""
        with self._cond:
            # Each claimer takes its part of the room, so that the others have some to claim at once.
            part = -(-self.capacity // self.claimers)
            free = min(cross_room(self.capacity, self._inflight, self._unrecorded), part)
            if self._taken_over:  # they come first in the pick (`liveness.AHEAD`) and were started once already
                self._taken_over, free = False, part
            if free <= 0:
                self._room_wanted = True
                return now + self.idle, True
            self._inflight += free  # reserved while the claim runs
        try:
            # No tenant first for being this process's (its timer leases): every process claims in the
            # round robin's one order, so a tenant's place in a burst does not depend on whether the
            # process holding its lease is busy, or dead (its leases move only once they lapse).
            batch = self.store.claim_across(now, free, share=self.share, tenant_exists=self.tenant_exists)
        finally:
            with self._cond:
                self._inflight -= free
        self._count_records(batch.recorded)
        by_tenant: dict[str, list[Any]] = {}
        for claim in batch.claims:
            by_tenant.setdefault(claim.tenant, []).append(claim)
        with self._cond:
            # A full pass of retries only (the rows taken over come first): more may be left, the next takes them too.
            self._taken_over = self._taken_over or (batch.full and bool(batch.claims)
                                                    and all(c.attempt > 1 for c in batch.claims))
            self._inflight += len(batch.claims)
            for tenant, claims in by_tenant.items():
                self._unfinished_by[tenant] += len(claims)
                self._held_by[tenant] += len(claims)
                # A retry (a dead process's run taken over, most often) started once already: it
                # goes before what this process holds, as it went first in the pick.
                self._fair.add(tenant, [c for c in claims if c.attempt > 1], first=True)
                self._fair.add(tenant, [c for c in claims if c.attempt <= 1])
            self._claims.update(((c.tenant, c.run_id), c) for c in batch.claims)
        self._start_queued()
        if not batch.full and batch.backlog is not None and batch.backlog != self._backlogs:
            self._backlogs = dict(batch.backlog)
            self.metrics.set_backlog(self._backlogs)
        return next_look(batch, now, self.idle)

    # -- synchronous use (tests) -----------------------------------------------------------

    def tick(self, tenant: str = "", limit: int = 100) -> list[Any]:
        """One pass across every tenant, run in this thread and recorded as `_record_done` records
        them (`finish_across`); for tests with a manual clock, so that they drive the claim and the
        record that production runs on PostgreSQL. `tenant` is not used: the pass claims by the index.
        """
        batch = self.store.claim_across(self.clock.now(), limit, share=self.share, tenant_exists=self.tenant_exists)
        self._count_records(batch.recorded)
        with self._cond:  # held and in flight as a pass holds them, so that the record gives them back
            self._inflight += len(batch.claims)
            self._unrecorded += len(batch.claims)
            for claim in batch.claims:
                self._held_by[claim.tenant] += 1
                self._claims[(claim.tenant, claim.run_id)] = claim
        self._record_done([self._run(claim) for claim in batch.claims])
        return list(batch.claims)
