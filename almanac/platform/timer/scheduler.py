"""The timer: per tenant, claim what is due, run it, record it, sleep until the next due time.

One loop thread keeps, for every tenant, the time it next needs attention. Ticking
a tenant claims due occurrences (the store plans the next ones in the same
transaction) within the tenant's share of the claim capacity, and queues them in
the tenant's own queue; free run slots go round robin between tenants
(`slots.FairQueue`), at most `run_limit` runs out at once, through the runner's
`submit` (the sandbox pool calls back when a run ends) or a thread pool. The
leases of every claim not yet recorded are renewed a third of the margin apart,
so waiting never looks like dying. Finished runs go to one recorder thread,
which records them many per transaction per tenant (each fenced by its own lease
token), lingering `RECORD_LINGER_S` while other runs are out so that they share
a transaction. A run's start is when its script started (the runner reports how
long it ran), not when it was handed over.

Nothing here decides policy or holds schedules: the database is the truth and
any number of processes may run this loop for the same tenants.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from almanac.platform.clock import Clock
from almanac.platform.store.run_effects import TenantReads
from almanac.platform.decisions import slots
from almanac.platform.timer.metrics import SchedulerMetrics, get_metrics
from almanac.platform.decisions.policies import LEASE_MARGIN_S
from almanac.platform.runner import Runner, broken, storable
from almanac.platform.store.contract import Claim, Store
from almanac.platform.timer.recorder import RECORD_LINGER_S, RecorderMixin, _Finished
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.sandbox.limits import Limits

log = logging.getLogger("almanac.scheduler")




def default_workers() -> int:
    return max(2, os.cpu_count() or 2)


# The longest a timer sleeps without looking at its due work (unless a wake-up comes first).
IDLE_S = 5.0

class RunWatcher(Protocol):
    """Told about the runs that entered through `Scheduler.enqueue` (`admission.Admission`); the
    timer's own claims pass through unchanged. Called on the runner's and the recorder's threads."""

    def event(self, claim: Claim, event: dict[str, Any]) -> dict[str, Any]:
        """The event the run's script is given."""

    def ended(self, claim: Claim, result: RunResult) -> RunResult:
        """The run ended: what of its result is recorded."""

    def released(self, claims: list[Claim]) -> None:
        """These runs were recorded (or given up), and their slots given back."""


class Scheduler(RecorderMixin):
    def __init__(
        self, store: Store, runner: Runner, clock: Clock, tenants: Callable[[], Iterable[str]], *,
        workers: int | None = None, metrics: SchedulerMetrics | None = None,
        idle_s: float = IDLE_S, tenants_every_s: float = 5.0, record_linger_s: float = RECORD_LINGER_S,
        tenant_max_share: float = 0.5, parallel: int | None = None, renew_every_s: float | None = None,
    ) -> None:
        self.store, self.runner, self.clock, self.tenants = store, runner, clock, tenants
        self.workers = workers or default_workers()  # the most runs the runner accepts at once
        # Runs that really execute at once (sandbox processes; threads otherwise): see `slots.run_limit`.
        self.parallel = parallel or getattr(runner, "processes", 0) or self.workers
        self.share = tenant_max_share
        self._fair: slots.FairQueue[Claim] = slots.FairQueue(tenant_max_share)
        self._avg_run_s: float | None = None  # the runs' average time, for the run limit
        self._unfinished_by: Counter[str] = Counter()  # claimed and not yet ended, per tenant
        self._held_by: Counter[str] = Counter()  # claimed and not yet recorded, per tenant
        # Claimed and not yet recorded, by (tenant, run id) (run ids repeat across tenants): their leases are renewed.
        self._claims: dict[tuple[str, int], Claim] = {}
        self._served: dict[str, int] = {}  # tenant -> when it last claimed (a counter): least recent goes first
        self._serial = 0
        self._due_now = 0  # tenants the loop found due in its current pass
        # Leases are renewed while their runs wait and run, a third of the margin apart, so only a
        # process that stopped loses its runs (SPEC section 11).
        margin = getattr(store, "lease_margin_s", LEASE_MARGIN_S)
        self.renew_every = timedelta(seconds=renew_every_s if renew_every_s is not None else margin / 3)
        self.metrics = metrics or get_metrics()
        self.idle = timedelta(seconds=idle_s)
        self.tenants_every = timedelta(seconds=tenants_every_s)
        self.record_linger_s = record_linger_s
        self._cond = threading.Condition()
        self._wakes: dict[str, datetime] = {}
        self._starved: set[str] = set()
        self._backlogs: dict[str, int] = {}
        self._inflight = 0  # claimed and not yet recorded
        self._unrecorded = 0  # of those, finished: waiting for (or in) the recorder
        self._running = 0  # runs started and not yet ended
        self._local = threading.local()  # `_start_queued` is running on this thread
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None  # only for a runner without `submit`
        self._finished: queue.Queue[_Finished | None] = queue.Queue()
        self._recorder: threading.Thread | None = None
        self.watcher: RunWatcher | None = None

    # -- life cycle -----------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._start_running()
        self._thread = threading.Thread(target=self._loop, name="almanac-timer", daemon=True)
        self._thread.start()
        log.info("scheduler.started", extra={"event": "scheduler.started", "workers": self.workers})

    def _start_running(self) -> None:
        """What runs need, with or without the claiming loop: the recorder, and a thread pool for a
        runner without `submit` (a server started with --no-scheduler still runs what `enqueue` takes)."""
        with self._cond:
            if self._recorder is not None:
                return
            if getattr(self.runner, "submit", None) is None and self._pool is None:
                self._pool = ThreadPoolExecutor(slots.OVERFLOW * self.workers, thread_name_prefix="almanac-run")
            self._recorder = threading.Thread(target=self._record_loop, name="almanac-recorder", daemon=True)
            self._recorder.start()

    def enqueue(self, claims: list[Claim]) -> None:
        """Runs claimed outside the timer's own claim (run now, run again, a trial) join its fair queue:
        the same run limit, the same shares between tenants, the same recorder."""
        self._start_running()
        with self._cond:
            for claim in claims:
                self._inflight += 1
                self._unfinished_by[claim.tenant] += 1
                self._held_by[claim.tenant] += 1
                self._claims[(claim.tenant, claim.run_id)] = claim
                self._fair.add(claim.tenant, [claim])
        self._start_queued()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming; let running scripts finish and record (their leases would cover a crash)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._cond:  # every claimed run still runs (its lease would only lapse otherwise)
            while self._running or self._fair:
                self._cond.wait(0.1)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
            self._pool = None
        if self._recorder is not None:
            self._finished.put(None)  # after every run's record: the recorder drains them, then ends
            self._recorder.join(timeout)
            self._recorder = None
        log.info("scheduler.stopped", extra={"event": "scheduler.stopped"})

    def outstanding(self) -> "Outstanding":
        """What this process holds right now (runs running, claimed, finished but unrecorded): all 0 when idle."""
        with self._cond:
            return Outstanding(self._running, self._inflight, self._unrecorded)

    def wake(self, tenant: str) -> None:
        """Something changed for this tenant (a schedule, a job): look at it now."""
        with self._cond:
            self._wakes[tenant] = self.clock.now()
            self._cond.notify_all()

    # -- the loop ---------------------------------------------------------------------

    def _prepare_runner(self) -> None:
        """Let the runner get ready (sandbox processes take seconds) before the first claim.

        Claiming earlier would only start leases, and lag, on runs that cannot start yet;
        a first run slowed by the start-up could also make the next occurrence overlap.
        """
        prepare = getattr(self.runner, "prepare", None)
        if prepare is None:
            return
        try:
            prepare()
        except Exception:
            log.exception("scheduler.runner_prepare_failed", extra={"event": "scheduler.runner_prepare_failed"})

    @property
    def run_limit(self) -> int:
        """Runs handed to the runner at once (see `slots.run_limit`)."""
        return slots.run_limit(self.parallel, self.workers, self._avg_run_s)

    @property
    def capacity(self) -> int:
        """Runs claimed and not yet ended, at most: a few runs' wait ahead of the slots."""
        return slots.CLAIM_AHEAD * self.run_limit

    def _loop(self) -> None:
        self._prepare_runner()
        next_tenants = next_renewal = self.clock.now()
        while True:
            with self._cond:
                if self._stopping:
                    return
            now = self.clock.now()
            if now >= next_tenants:
                self._refresh_tenants(now)
                next_tenants = now + self.tenants_every
            if now >= next_renewal:
                self.renew_leases(now)
                next_renewal = now + self.renew_every
            # Tenants with nothing in hand go first (their due work waits on nobody), then the one
            # that claimed least recently, so that when room is short (a herd at the top of the
            # hour) every tenant's turn comes round.
            due = [t for t, at in list(self._wakes.items()) if at <= now]
            self._due_now = len(due)  # several tenants due together (a herd): shares apply from the first
            for tenant in sorted(due, key=lambda t: (self._held_by[t] > 0, self._served.get(t, 0))):
                self._wakes[tenant] = self._tick_safely(tenant, now)
            with self._cond:
                if self._stopping:
                    return
                soonest = min([*self._wakes.values(), next_tenants, next_renewal, now + self.idle])
                delay = (soonest - self.clock.now()).total_seconds()
                if delay > 0:
                    self._cond.wait(delay)

    def _refresh_tenants(self, now: datetime) -> None:
        try:
            known = set(self.tenants())
        except Exception:
            log.exception("scheduler.tenants_failed", extra={"event": "scheduler.tenants_failed"})
            return
        with self._cond:
            for tenant in known - self._wakes.keys():
                self._wakes[tenant] = now
            for tenant in self._wakes.keys() - known:
                del self._wakes[tenant]
                self._backlogs.pop(tenant, None)

    def _tick_safely(self, tenant: str, now: datetime) -> datetime:
        try:
            return self._tick(tenant, now)
        except Exception:
            log.exception("scheduler.tick_failed", extra={"event": "scheduler.tick_failed", "tenant": tenant})
            return now + timedelta(seconds=1)

    def _tick(self, tenant: str, now: datetime) -> datetime:
        """Claim what is due for one tenant; return when to look at it again."""
        with self._cond:
            free = self._room(tenant)
            if free <= 0:
                self._starved.add(tenant)  # a finishing run wakes it
                return now + self.idle
            self._inflight += free  # reserve the slots while the claim runs
            self._unfinished_by[tenant] += free
            self._held_by[tenant] += free
            self._serial += 1
            self._served[tenant] = self._serial
        try:
            batch = self.store.claim_due(tenant, now, free)
        finally:
            with self._cond:
                self._inflight -= free
                self._unfinished_by[tenant] -= free
                self._held_by[tenant] -= free
        self._count_records(batch.recorded)
        with self._cond:
            self._inflight += len(batch.claims)
            self._unfinished_by[tenant] += len(batch.claims)
            self._held_by[tenant] += len(batch.claims)
            self._claims.update(((c.tenant, c.run_id), c) for c in batch.claims)
            self._fair.add(tenant, batch.claims)
        self._start_queued()
        if batch.full:
            return now
        backlog = batch.backlog if batch.backlog is not None else self.store.backlog(tenant, now)
        if self._backlogs.get(tenant) != backlog:
            self._backlogs[tenant] = backlog
            self.metrics.set_backlog(self._backlogs)
        due = batch.next_due_at if batch.backlog is not None else self.store.next_due_at(tenant)
        return min(due, now + self.idle) if due is not None else now + self.idle

    def _count_records(self, recorded: list[tuple[str, int]]) -> None:
        for status, count in recorded:
            if status != "lease_lapsed":
                self.metrics.runs_with(status).inc(count)

    # -- one run ------------------------------------------------------------------------

    def _start_queued(self) -> None:
        """Start queued claims, fairly between tenants, while fewer than `run_limit` runs are out (any thread).

        A run that ends at once (the runner refused it, or called back before returning)
        calls this again from inside `_start`: that inner call returns at once and this
        loop goes on, so a long queue of refusals is a loop, not a deep recursion.
        """
        if getattr(self._local, "starting", False):
            return
        self._local.starting = True
        try:
            while True:
                with self._cond:
                    limit = self.run_limit
                    if self._running < limit:
                        picked = self._fair.pop(limit)
                    else:  # every slot taken: a tenant under its share starts beside them (`slots.OVERFLOW`)
                        picked = self._fair.pop(limit, lone=False) if self._running < slots.OVERFLOW * limit else None
                    if picked is None:
                        return
                    claim = picked[1]
                    self._running += 1
                self._start(claim)
        finally:
            self._local.starting = False

    def _start(self, claim: Claim) -> None:
        started, reads, event, t0 = self._prepare(claim)

        def ended(result: RunResult) -> None:
            self._ended(claim, started, t0, result, event)

        try:
            request = _request(claim, event)
            if self._pool is None:  # the runner has `submit` (see `start`)
                self.runner.submit(request, reads, ended)  # type: ignore[attr-defined]
            else:
                self._pool.submit(lambda: ended(self._call_runner(claim, request, reads)))
        except Exception as exc:  # the runner refused it (closing, say): the run failed, the platform goes on
            ended(_runner_broke(claim, exc))

    def _ended(self, claim: Claim, started: datetime, t0: float, result: RunResult, event: dict[str, Any]) -> None:
        """A run ended (on the runner's thread): queue it for the recorder, start the next."""
        try:
            if self.watcher is not None:
                result = self.watcher.ended(claim, result)
            done: _Finished | None = self._finished_run(claim, started, t0, result, event)
        except Exception:
            log.exception("run.record_failed", extra={"event": "run.record_failed", "run_id": claim.run_id})
            done = None
        with self._cond:  # counted before the recorder can release it
            self._running -= 1
            self._fair.ended(claim.tenant)
            self._unfinished_by[claim.tenant] -= 1
            if done is not None:
                self._unrecorded += 1
                self._learn_run_time(done, getattr(result, "duration_ms", 0) or 0)
            self._wake_starved()
        if done is None:
            self._release([claim], recorded=False)
        else:
            self._finished.put(done)  # the recorder releases the slot once recorded
        self._start_queued()

    def _room(self, tenant: str, holders: int | None = None) -> int:
        """(Holding the condition.) How many runs `tenant` may claim now; 0: wait for room.

        Within the capacity (runs that ended count until recorded, up to twice it: the recorder
        lingers to batch them) and, once the claims drained to half, up to the tenant's share of
        it, and of the recorder's backlog, while other tenants hold claims (alone, it may take
        all). A tenant with nothing in hand may always claim its share of the run slots: its
        due work then waits on nobody, whatever the others hold.
        """
        capacity, unfinished, mine = self.capacity, self._inflight - self._unrecorded, self._unfinished_by[tenant]
        held = self._held_by[tenant]
        floor = slots.share_of(self.run_limit, self.share) if held == 0 else 0
        if holders is None:
            holders = sum(1 for n in self._held_by.values() if n > 0)
        others = holders - (held > 0) > 0 or self._due_now > 1
        share = self.share if others else 1.0  # others hold claims, or are due too: shares apply
        room = min(slots.claim_room(capacity, unfinished, mine, share), 2 * capacity - self._inflight,
                   slots.share_of(2 * capacity, share) - held)
        if not slots.wants_refill(capacity, unfinished, mine, share):
            room = 0
        return max(room, floor)

    def _learn_run_time(self, done: _Finished, reported_ms: int) -> None:
        """(Holding the condition.) Fold a run's own time into the average the run limit follows.

        A runner with `submit` says how long each run ran (0: under a millisecond); the time
        since hand-over would count its queue too. A thread of our own runs at once: its time is it.
        """
        run_s = max(reported_ms, 0.5) / 1000 if self._pool is None else done.elapsed_s
        avg = self._avg_run_s
        self._avg_run_s = run_s if avg is None else avg + slots.EWMA_WEIGHT * (run_s - avg)

    def _release(self, claims: list[Claim], *, recorded: bool = True) -> None:
        with self._cond:
            self._inflight -= len(claims)
            if recorded:
                self._unrecorded -= len(claims)
            for claim in claims:
                self._claims.pop((claim.tenant, claim.run_id), None)
                self._held_by[claim.tenant] -= 1
            self._wake_starved()
        if self.watcher is not None:
            self.watcher.released(claims)

    def _wake_starved(self) -> None:
        """(Holding the condition.) Wake the tenants that found no room once they have room again."""
        if not self._starved:
            return
        if self._inflight >= 2 * self.capacity:
            return
        holders = sum(1 for n in self._held_by.values() if n > 0)
        ready = [t for t in self._starved if self._room(t, holders) > 0]
        if ready:
            now = self.clock.now()
            for tenant in ready:
                self._wakes[tenant] = now
                self._starved.discard(tenant)
            self._cond.notify_all()

    def renew_leases(self, now: datetime | None = None) -> int:
        """Extend the leases of every claimed run not yet recorded (waiting or running); how many were lost.

        A claim whose lease another process took over meanwhile (this one was paused past it) is
        dropped from the queue if it has not started; a started one is fenced when recorded.
        """
        now = now or self.clock.now()
        with self._cond:
            by_tenant: dict[str, list[Claim]] = {}
            for claim in self._claims.values():
                if claim.occurrence_id is not None:
                    by_tenant.setdefault(claim.tenant, []).append(claim)
        lost = 0
        for tenant, claims in by_tenant.items():
            try:
                gone = self.store.renew_leases(tenant, claims, now)
            except Exception:
                log.exception("run.lease_renewal_failed", extra={"event": "run.lease_renewal_failed", "tenant": tenant})
                continue
            with self._cond:  # a run recorded since the snapshot is not a lost one
                gone = {run_id for run_id in gone if (tenant, run_id) in self._claims}
            if gone:
                with self._cond:
                    dropped = self._fair.remove(tenant, gone)
                    self._unfinished_by[tenant] -= len(dropped)
                lost += len(gone)
                if dropped:
                    self._release(dropped, recorded=False)
                log.warning("run.lease_lost", extra={"event": "run.lease_lost", "tenant": tenant, "runs": len(gone)})
        return lost

    def run_claim(self, claim: Claim) -> bool:
        """Run one claimed attempt and record it; True if the record applied (lease still held)."""
        done = self._run(claim)
        applied = self._finish_one(done)
        if applied is None:
            return False
        if self._after_record(done, applied):
            self._wake_soon(claim.tenant)
        return applied

    def _run(self, claim: Claim) -> _Finished:
        started, reads, event, t0 = self._prepare(claim)
        try:
            request = _request(claim, event)
        except Exception as exc:
            return self._finished_run(claim, started, t0, _runner_broke(claim, exc), event)
        return self._finished_run(claim, started, t0, self._call_runner(claim, request, reads), event)

    def _finished_run(self, claim: Claim, started: datetime, t0: float, result: RunResult,
                      event: dict[str, Any]) -> _Finished:
        elapsed = self.clock.monotonic() - t0
        finished = self.clock.now()
        # The script started when the runner says it ran for `duration_ms` before its end, not when
        # it was handed over (it may have waited in the sandbox pool's queue meanwhile).
        if result.duration_ms:
            started = max(started, finished - timedelta(milliseconds=result.duration_ms))
        self.metrics.start_lag.observe(max(0.0, (started - claim.scheduled_for).total_seconds()))
        # The run's record keeps the event its script was given (SPEC section 9).
        return _Finished(claim, replace(_recordable(result, elapsed), event=event), started, finished, elapsed)

    def _prepare(self, claim: Claim) -> tuple[datetime, TenantReads, dict[str, Any], float]:
        """The run's start: the reads its script makes, and the event it sees."""
        started = self.clock.now()
        reads = TenantReads(self.store, claim.tenant, now=started, job_root=claim.job_root)
        event = claim.event(started.isoformat().replace("+00:00", "Z"))
        if self.watcher is not None:
            event = self.watcher.event(claim, event)
        return started, reads, event, self.clock.monotonic()

    def _call_runner(self, claim: Claim, request: RunRequest, reads: TenantReads) -> RunResult:
        try:
            return self.runner.run(request, reads)
        except Exception as exc:
            return _runner_broke(claim, exc)

    # -- synchronous use (tests, `run now`) ------------------------------------------------

    def tick(self, tenant: str, limit: int = 100) -> list[Claim]:
        """Claim what is due now and run it in this thread; for tests with a manual clock."""
        batch = self.store.claim_due(tenant, self.clock.now(), limit)
        self._count_records(batch.recorded)
        for claim in batch.claims:
            self.run_claim(claim)
        return batch.claims


class Outstanding(NamedTuple):
    running: int
    claimed: int  # claimed and not yet recorded (includes the two below it)
    unrecorded: int  # finished, waiting for (or in) the recorder


def _runner_broke(claim: Claim, exc: Exception) -> RunResult:
    log.error("run.runner_failed", exc_info=exc, extra={"event": "run.runner_failed", "run_id": claim.run_id})
    return broken(exc)


def _request(claim: Claim, event: dict[str, Any]) -> RunRequest:
    """The run's request (ValueError for limits out of range: the run fails, the platform goes on)."""
    return RunRequest(claim.source, event, Limits(timeout_ms=claim.timeout_ms, memory_mb=claim.memory_mb))


def _recordable(result: RunResult, elapsed_s: float) -> RunResult:
    """A runner's result as it will be recorded: checked once, here, so no run can write a broken row."""
    checked = storable(result)
    if checked.duration_ms:
        return checked
    return replace(checked, duration_ms=int(elapsed_s * 1000))
