"""The timer: claim what is due, run it, record it, sleep until the next due time.

The claim loop asks its claim path (`claim_paths`: per tenant, or across tenants through
the due index) what is due and how much to claim (the store plans the next occurrences in
the same transaction), and queues the claims in each tenant's own queue; free run slots go
round robin between tenants
(`slots.FairQueue`), at most `run_limit` runs out at once, through the runner's
`submit` (the sandbox pool calls back when a run ends) or a thread pool. The
leases of every claim not yet recorded are renewed a third of the margin apart, by a
thread of their own, so waiting never looks like dying. Finished runs go to one
recorder thread (`recorder`), which records them many per transaction (each fenced
by its own lease token), lingering while other runs are out so that they share a
transaction. A run's start is when its script started (the runner reports how
long it ran), not when it was handed over.

Nothing here decides policy or holds schedules: the database is the truth and
any number of processes may run this loop for the same tenants.
"""

from __future__ import annotations

import logging
import os
import time
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from almanac.platform.clock import Clock
from almanac.platform.store.run_effects import TenantReads
from almanac.platform.decisions import pacing, slots
from almanac.platform.timer.metrics import SchedulerMetrics, get_metrics
from almanac.platform.decisions import policies
from almanac.platform.decisions.policies import LEASE_MARGIN_S
from almanac.platform.runner import Runner
from almanac.platform.store.contract import Claim, Store
from almanac.platform.store.due_index.claim import DueIndex
from almanac.platform.timer.claim_paths import AcrossTenants, ClaimPath, Pace, PerTenant
from almanac.platform.timer.runs import Outstanding, RunWatcher, recordable, run_request, runner_broke
from almanac.platform.timer.recorder import RECORD_LINGER_S, Finished, Recorder
from almanac.sandbox.contract import RunRequest, RunResult

log = logging.getLogger("almanac.scheduler")

def default_workers() -> int:
    return max(2, os.cpu_count() or 2)

# The longest a timer sleeps without looking at its due work (unless a wake-up comes first).
IDLE_S = 5.0

class Scheduler:
    """Run slots, the fair queue, the runner, the recorder, lease renewal, and the claim loop over
    one claim path (`claim_paths.PerTenant` unless another is given; `across_tenants` builds
    the one that claims through PostgreSQL's due index)."""

    def __init__(
        self, store: Store, runner: Runner, clock: Clock, tenants: Callable[[], Iterable[str]] | None = None, *,
        path: ClaimPath | None = None, workers: int | None = None, metrics: SchedulerMetrics | None = None,
        idle_s: float = IDLE_S, tenants_every_s: float = 5.0, record_linger_s: float = RECORD_LINGER_S,
        tenant_max_share: float = 0.5, parallel: int | None = None, renew_every_s: float | None = None,
    ) -> None:
        self.store, self.runner, self.clock = store, runner, clock
        self.idle = timedelta(seconds=idle_s)
        self.path: ClaimPath = path or PerTenant(store, tenants or (lambda: ()), idle=self.idle,
                                                 tenants_every=timedelta(seconds=tenants_every_s))
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
        # Lease ends as last renewed, by (tenant, run id); a claim not in it holds its claimed one.
        self._held_until: dict[tuple[str, int], datetime] = {}
        self.due_together = 0  # scopes the claim loop found due in its current pass (a herd: shares apply)
        # Leases are renewed while their runs wait and run, a third of the margin apart, so only a
        # process that stopped loses its runs (SPEC section 11).
        self.lease_margin_s: float = getattr(store, "lease_margin_s", LEASE_MARGIN_S)
        self.renew_every = timedelta(seconds=renew_every_s if renew_every_s is not None else self.lease_margin_s / 3)
        self.metrics = metrics or get_metrics()
        self._cond = threading.Condition()
        self._woken = False  # a wake-up came during a claim pass: look again at once
        self._inflight = 0  # claimed and not yet recorded
        self._unrecorded = 0  # of those, finished: waiting for (or in) the recorder
        self._running = 0  # runs started and not yet ended
        self._local = threading.local()  # `_start_queued` is running on this thread
        self._stopping = False
        self._claimers: list[threading.Thread] = []
        self._runner_ready = threading.Event()  # the other claimers wait for the runner, as the first does
        self._renewer: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None  # only for a runner without `submit`
        self.recorder = Recorder(self.path, store, self.metrics, release=self._release, wake=self._wake_soon,
                                 busy=lambda: self._inflight > 1, linger_s=record_linger_s)
        self.watcher: RunWatcher | None = None

    # -- what the claim path reads (`claim_paths.Holdings`), holding the condition ------------

    @property
    def inflight(self) -> int:
        return self._inflight

    @property
    def unrecorded(self) -> int:
        return self._unrecorded

    def held(self, tenant: str) -> int:
        return self._held_by[tenant]

    def unfinished(self, tenant: str) -> int:
        return self._unfinished_by[tenant]

    def holders(self) -> int:
        return sum(1 for n in self._held_by.values() if n > 0)

    @property
    def run_limit(self) -> int:
        """Runs handed to the runner at once (see `slots.run_limit`)."""
        return slots.run_limit(self.parallel, self.workers, self._avg_run_s)

    @property
    def capacity(self) -> int:
        """Runs claimed and not yet ended, at most (`ClaimPath.capacity`)."""
        pace = Pace(self.run_limit, self.parallel, self._avg_run_s, self.recorder.ends.per_s())
        return self.path.capacity(pace)

    # -- life cycle -----------------------------------------------------------------

    def start(self) -> None:
        """The claim loop (`path.claimers` threads), the recorder, and a thread renewing leases.

        Renewal does not wait for the loop: a claim on a busy database may take longer than a
        lease, and a claim waiting for its slot must not look dead meanwhile.
        """
        if self._claimers:
            return
        self._stopping = False
        self._start_running()
        self._claimers = [threading.Thread(target=self._claim_loop, args=(n == 0,), daemon=True,
                                           name="almanac-timer" + (f"-{n}" if n else ""))
                          for n in range(self.path.claimers)]
        for thread in self._claimers:
            thread.start()
        log.info("scheduler.started", extra={"event": "scheduler.started", "workers": self.workers})

    def _start_running(self) -> None:
        """What runs need, with or without the claim loop: the recorder, lease renewal, and a thread
        pool for a runner without `submit` (a server started with --no-scheduler still runs what
        `enqueue` takes)."""
        with self._cond:
            if self.recorder.running:
                return
            if getattr(self.runner, "submit", None) is None and self._pool is None:
                self._pool = ThreadPoolExecutor(slots.OVERFLOW * self.workers, thread_name_prefix="almanac-run")
            self.recorder.start()
            self._renewer = threading.Thread(target=self._renew_loop, name="almanac-renew", daemon=True)
            self._renewer.start()

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
        with self._cond:  # no claimer may add claims once the drain below has begun
            self._stopping = True
            self._cond.notify_all()
        self._runner_ready.set()
        for thread in self._claimers:
            thread.join(timeout)
        self._claimers = []
        with self._cond:  # every claimed run still runs (its lease would only lapse otherwise)
            while self._running or self._fair:
                self._cond.wait(0.1)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
            self._pool = None
        self.recorder.stop(timeout)  # after every run's record: nothing is left to renew
        if self._renewer is not None:
            with self._cond:
                self._cond.notify_all()
            self._renewer.join(timeout)
            self._renewer = None
        log.info("scheduler.stopped", extra={"event": "scheduler.stopped"})

    def outstanding(self) -> "Outstanding":
        """What this process holds right now (runs running, claimed, finished but unrecorded): all 0 when idle."""
        with self._cond:
            return Outstanding(self._running, self._inflight, self._unrecorded)

    def wake(self, tenant: str) -> None:
        """Something changed for this tenant (a schedule, a job, a recorded run): look at it now."""
        with self._cond:
            self.path.wake(tenant, self.clock.now())
            self._woken = True
            self._cond.notify_all()

    def _wake_soon(self, tenant: str) -> None:
        if self._claimers:
            self.wake(tenant)

    # -- the claim loop ----------------------------------------------------------------

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

    def _claim_loop(self, first: bool) -> None:
        if first:
            self._prepare_runner()
            self._runner_ready.set()
        self._runner_ready.wait()
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._woken = False
            now = self.clock.now()
            self._claim_pass(now)
            with self._cond:
                if self._stopping:
                    return
                again, wakeable = self.path.next_look(now)
                if self._woken and wakeable:
                    continue
                delay = (min(again, now + self.idle) - self.clock.now()).total_seconds()
                if wakeable:
                    if delay > 0:
                        self._cond.wait(delay)
                else:  # notified at every run's end: only stopping may cut this wait short
                    self._cond.wait_for(lambda: self._stopping, max(0.0, delay))

    def _claim_pass(self, now: datetime) -> None:
        """Claim every scope the path finds due now, each within its room."""
        with self._cond:
            scopes = self.path.due(now, self)
            self.due_together = len(scopes)
        for scope in scopes:
            try:
                self._claim(scope, now)
            except Exception:  # the database is away, a tenant was dropped...: this scope again in a second
                log.exception("scheduler.claim_failed", extra={"event": "scheduler.claim_failed", "scope": scope})
                with self._cond:
                    self.path.wake(scope, now + timedelta(seconds=1))

    def _claim(self, scope: str, now: datetime) -> None:
        """Claim what is due of one scope within its room, and queue it for the run slots."""
        with self._cond:
            free = self.path.room(scope, self)
            if free <= 0:
                self.path.starved(scope, now)  # room coming back wakes it (`_wake_starved`)
                return
            self._inflight += free  # reserved while the claim runs
        try:
            claimed = self.path.claim(scope, now, free, self.share)
        finally:
            with self._cond:
                self._inflight -= free
        self._count_records(claimed.recorded)
        self._hold(claimed.claims, queue=True)
        self._start_queued()
        backlogs = self.path.claimed(scope, claimed, now)
        if backlogs is not None:
            self.metrics.set_backlog(backlogs)

    def _hold(self, claims: list[Claim], *, queue: bool) -> None:
        """Count these claims as held (their leases renewed until recorded); `queue`: for the run slots."""
        by_tenant: dict[str, list[Claim]] = {}
        for claim in claims:
            by_tenant.setdefault(claim.tenant, []).append(claim)
        with self._cond:
            self._inflight += len(claims)
            for tenant, mine in by_tenant.items():
                self._unfinished_by[tenant] += len(mine)
                self._held_by[tenant] += len(mine)
                if queue:  # a retry (a dead process's run taken over, most often) started once already: first
                    self._fair.add(tenant, [c for c in mine if c.attempt > 1], first=True)
                    self._fair.add(tenant, [c for c in mine if c.attempt <= 1])
            self._claims.update(((c.tenant, c.run_id), c) for c in claims)

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
            request = run_request(claim, event)
            if self._pool is None:  # the runner has `submit` (see `start`)
                self.runner.submit(request, reads, ended)  # type: ignore[attr-defined]
            else:
                self._pool.submit(lambda: ended(self._call_runner(claim, request, reads)))
        except Exception as exc:  # the runner refused it (closing, say): the run failed, the platform goes on
            ended(runner_broke(claim, exc))

    def _ended(self, claim: Claim, started: datetime, t0: float, result: RunResult, event: dict[str, Any]) -> None:
        """A run ended (on the runner's thread): queue it for the recorder, start the next."""
        try:
            if self.watcher is not None:
                result = self.watcher.ended(claim, result)
            done: Finished | None = self._finished_run(claim, started, t0, result, event)
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
            self.recorder.put(done)  # the recorder releases the slot once recorded
        self._start_queued()

    def _learn_run_time(self, done: Finished, reported_ms: int) -> None:
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
        """(Holding the condition.) A claim that found no room is made again once room is back."""
        if self.path.room_back(self, self.clock.now()):
            self._woken = True
            self._cond.notify_all()

    def _renew_loop(self) -> None:
        every = self.renew_every.total_seconds()
        while True:
            with self._cond:
                # The condition is notified at every run's end and every pass: waking on it renewed
                # every held lease many times a second under a burst.
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
        return self._stopping and not self._claims and not self.recorder.running

    def renew_leases(self, now: datetime | None = None) -> int:
        """Extend the leases of the claimed runs not yet recorded (waiting or running); how many were lost.

        Only the leases claimed or renewed a round ago or more (`policies.renewal_due`): a claim of
        the last moment is most often recorded before the next round. A claim whose lease another
        process took over meanwhile (this one was paused past it) is dropped from the queue if it
        has not started; a started one is fenced when recorded.
        """
        now = now or self.clock.now()
        with self._cond:
            self._held_until = {key: at for key, at in self._held_until.items() if key in self._claims}
            claims = [c for key, c in self._claims.items() if c.occurrence_id is not None and policies.renewal_due(
                self._held_until.get(key, c.lease_until), now, c.timeout_ms, self.lease_margin_s, self.renew_every)]
        if not claims:
            return 0
        try:
            gone = self.path.renew(claims, now)
        except Exception:
            log.exception("run.lease_renewal_failed", extra={"event": "run.lease_renewal_failed"})
            return 0
        lost: dict[str, set[int]] = {}
        with self._cond:  # a run recorded since the snapshot is neither renewed nor lost
            for c in claims:
                key = (c.tenant, c.run_id)
                if key not in self._claims:
                    continue
                if key in gone:
                    lost.setdefault(c.tenant, set()).add(c.run_id)
                else:
                    self._held_until[key] = policies.lease_until(now, c.timeout_ms, self.lease_margin_s)
        for tenant, run_ids in lost.items():
            with self._cond:
                dropped = self._fair.remove(tenant, run_ids)
                self._unfinished_by[tenant] -= len(dropped)
            if dropped:
                self._release(dropped, recorded=False)
            log.warning("run.lease_lost", extra={"event": "run.lease_lost", "tenant": tenant, "runs": len(run_ids)})
        return sum(len(v) for v in lost.values())

    def run_claim(self, claim: Claim) -> bool:
        """Run one claimed attempt and record it; True if the record applied (lease still held)."""
        done = self._run(claim)
        applied = self.recorder.finish_one(done)
        if applied is None:
            return False
        if self.recorder.after_record(done, applied):
            self._wake_soon(claim.tenant)
        return applied

    def _run(self, claim: Claim) -> Finished:
        started, reads, event, t0 = self._prepare(claim)
        try:
            request = run_request(claim, event)
        except Exception as exc:
            return self._finished_run(claim, started, t0, runner_broke(claim, exc), event)
        return self._finished_run(claim, started, t0, self._call_runner(claim, request, reads), event)

    def _finished_run(self, claim: Claim, started: datetime, t0: float, result: RunResult,
                      event: dict[str, Any]) -> Finished:
        elapsed = self.clock.monotonic() - t0
        finished = self.clock.now()
        # The script started when the runner says it ran for `duration_ms` before its end, not when
        # it was handed over (it may have waited in the sandbox pool's queue meanwhile).
        if result.duration_ms:
            started = max(started, finished - timedelta(milliseconds=result.duration_ms))
        self.metrics.start_lag.observe(max(0.0, (started - claim.scheduled_for).total_seconds()))
        # The run's record keeps the event its script was given (SPEC section 9).
        return Finished(claim, replace(recordable(result, elapsed), event=event), started, finished, elapsed)

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
            return runner_broke(claim, exc)

    # -- synchronous use (tests, `run now`) ------------------------------------------------

    def tick(self, tenant: str = "", limit: int = 100) -> list[Claim]:
        """Claim what is due now through the claim path and run each claim in this thread, recorded as
        the recorder records it; for tests with a manual clock, so that they drive the claim and the
        record that production runs. `tenant`: the per-tenant path's tenant (the other claims any)."""
        claimed = self.path.claim_now(tenant, self.clock.now(), limit, self.share)
        self._count_records(claimed.recorded)
        self._hold(claimed.claims, queue=False)
        for claim in claimed.claims:
            done = self._run(claim)
            with self._cond:
                self._unfinished_by[claim.tenant] -= 1
                self._unrecorded += 1
            self.recorder.record_done([done])
        return list(claimed.claims)

def across_tenants(store: Store, runner: Runner, clock: Clock, tenants: Callable[[], Iterable[str]] | None = None,
                   *, tenant_exists: Callable[[str], bool] | None = None, claim_ahead: int | None = None,
                   claimers: int = pacing.CLAIMERS, index: DueIndex | None = None, **options: Any) -> Scheduler:
    """A `Scheduler` whose claims go across tenants through the store's due index (PostgreSQL):
    `claim_paths.AcrossTenants`. `tenant_exists(slug)`: asked when a tenant's part of a pass
    failed, so that the index rows of a tenant that is gone are dropped rather than retried.
    `index`: the store's own unless given."""
    index = index or getattr(store, "due_index", None)
    if index is None:
        raise ValueError("claiming across tenants needs PostgreSQL's due index (SqlStore on PostgreSQL)")
    path = AcrossTenants(index, store, idle=timedelta(seconds=options.get("idle_s", IDLE_S)),
                         tenant_exists=tenant_exists, claim_ahead=claim_ahead, claimers=claimers)
    return Scheduler(store, runner, clock, tenants, path=path, **options)
