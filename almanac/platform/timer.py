"""The timer: per tenant, claim what is due, run it, record it, sleep until the next due time.

One loop thread keeps, for every tenant, the time it next needs attention
(background/000's timer per tenant, without a thread per tenant). Ticking a
tenant claims due occurrences from the store (which plans the next ones in the
same transaction) and starts the claims' runs, at most `workers` at a time (the
rest wait in a queue): through the runner's `submit` when it has one (the
sandbox pool calls back when a run ends, so no thread waits per run), else on a
thread pool. The server's event loop is never blocked. Finished runs go to one
recorder thread, which records whatever has finished meanwhile in one
transaction per tenant (each record still fenced by its own lease token), so a
burst costs a few transactions, not one per run; while other runs are still out
it first lingers `RECORD_LINGER_S` so that runs finishing a few at a time (as
sandboxed ones do) still share a transaction. After a tick the tenant
sleeps until its earliest `due_at`, at most `idle_s` so that changes made by
other processes are seen on SQLite (PostgreSQL LISTEN/NOTIFY will call `wake`).

Nothing here decides policy or holds schedules: the database is the truth and
any number of processes may run this loop for the same tenants.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from almanac.platform.clock import Clock
from almanac.platform.effects import RunEffects
from almanac.platform.metrics import SchedulerMetrics, get_metrics
from almanac.platform.runner import Runner, RunOutcome, broken, storable
from almanac.platform.store import Claim, Outcome, Store

log = logging.getLogger("almanac.scheduler")


RECORD_BATCH = 256  # finished runs recorded in one transaction, at most
RECORD_LINGER_S = 0.02  # while other runs are out, the recorder waits this long to gather more records


def default_workers() -> int:
    return max(2, os.cpu_count() or 2)


@dataclass(frozen=True)
class _Finished:
    """A run that has ended and waits for its record."""

    claim: Claim
    outcome: Outcome
    effects: RunEffects
    finished_at: datetime
    elapsed_s: float


class Scheduler:
    def __init__(
        self, store: Store, runner: Runner, clock: Clock, tenants: Callable[[], Iterable[str]], *,
        workers: int | None = None, metrics: SchedulerMetrics | None = None,
        idle_s: float = 5.0, tenants_every_s: float = 5.0, record_linger_s: float = RECORD_LINGER_S,
    ) -> None:
        self.store, self.runner, self.clock, self.tenants = store, runner, clock, tenants
        self.workers = workers or default_workers()
        # Claim ahead of the pool (claims wait in its queue) so that one claim transaction serves
        # many runs; refill only when half of that has drained (a low-water mark), not after every run.
        # Runs that finished and wait for their record do not count against the mark (the recorder
        # lingers to batch them), but every claimed run does until recorded, up to twice the capacity.
        self.capacity = self.workers * 16
        self.low_water = self.capacity // 2
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
        self._queued: deque[Claim] = deque()  # claimed, waiting for one of the `workers` places
        self._running = 0  # runs started and not yet ended
        self._local = threading.local()  # `_start_queued` is running on this thread
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None  # only for a runner without `submit`
        self._finished: queue.Queue[_Finished | None] = queue.Queue()
        self._recorder: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        if getattr(self.runner, "submit", None) is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="almanac-run")
        self._recorder = threading.Thread(target=self._record_loop, name="almanac-recorder", daemon=True)
        self._recorder.start()
        self._thread = threading.Thread(target=self._loop, name="almanac-timer", daemon=True)
        self._thread.start()
        log.info("scheduler.started", extra={"event": "scheduler.started", "workers": self.workers})

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming; let running scripts finish and record (their leases would cover a crash)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._cond:  # every claimed run still runs (its lease would only lapse otherwise)
            while self._running or self._queued:
                self._cond.wait(0.1)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
            self._pool = None
        if self._recorder is not None:
            self._finished.put(None)  # after every run's record: the recorder drains them, then ends
            self._recorder.join(timeout)
            self._recorder = None
        log.info("scheduler.stopped", extra={"event": "scheduler.stopped"})

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

    def _loop(self) -> None:
        self._prepare_runner()
        next_tenants = self.clock.now()
        while True:
            with self._cond:
                if self._stopping:
                    return
            now = self.clock.now()
            if now >= next_tenants:
                self._refresh_tenants(now)
                next_tenants = now + self.tenants_every
            for tenant in [t for t, at in list(self._wakes.items()) if at <= now]:
                self._wakes[tenant] = self._tick_safely(tenant, now)
            with self._cond:
                if self._stopping:
                    return
                soonest = min([*self._wakes.values(), next_tenants, now + self.idle])
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
            unfinished = self._inflight - self._unrecorded
            free = min(self.capacity - unfinished, 2 * self.capacity - self._inflight)
            if unfinished > self.low_water or free <= 0:
                self._starved.add(tenant)  # a finishing run wakes it
                return now + self.idle
            self._inflight += free  # reserve the slots while the claim runs
        try:
            batch = self.store.claim_due(tenant, now, free)
        finally:
            with self._cond:
                self._inflight -= free
        self._count_records(batch.recorded)
        with self._cond:
            self._inflight += len(batch.claims)
            self._queued.extend(batch.claims)
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
        """Start queued claims while fewer than `workers` runs are out (any thread).

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
                    if not self._queued or self._running >= self.workers:
                        return
                    claim = self._queued.popleft()
                    self._running += 1
                self._start(claim)
        finally:
            self._local.starting = False

    def _start(self, claim: Claim) -> None:
        started, effects, event, t0 = self._prepare(claim)

        def ended(result: Any) -> None:
            self._ended(claim, started, effects, t0, result)

        try:
            if self._pool is None:  # the runner has `submit` (see `start`)
                self.runner.submit(claim.source, event, claim.timeout_ms, claim.memory_mb, effects, ended)
            else:
                self._pool.submit(lambda: ended(self._call_runner(claim, event, effects)))
        except Exception as exc:  # the runner refused it (closing, say): the run failed, the platform goes on
            ended(_runner_broke(claim, exc))

    def _ended(self, claim: Claim, started: datetime, effects: RunEffects, t0: float, result: Any) -> None:
        """A run ended (on the runner's thread): queue it for the recorder, start the next."""
        try:
            done: _Finished | None = self._finished_run(claim, started, effects, t0, result)
        except Exception:
            log.exception("run.record_failed", extra={"event": "run.record_failed", "run_id": claim.run_id})
            done = None
        with self._cond:  # counted before the recorder can release it
            self._running -= 1
            if done is not None:
                self._unrecorded += 1
            self._wake_starved()
        if done is None:
            self._release(1, recorded=False)
        else:
            self._finished.put(done)  # the recorder releases the slot once recorded
        self._start_queued()

    def _release(self, count: int, *, recorded: bool = True) -> None:
        with self._cond:
            self._inflight -= count
            if recorded:
                self._unrecorded -= count
            self._wake_starved()

    def _wake_starved(self) -> None:
        """(Holding the condition.) Wake the tenants that found no room once there is room again."""
        if self._starved and self._inflight - self._unrecorded <= self.low_water \
                and self._inflight < 2 * self.capacity:
            now = self.clock.now()
            for tenant in self._starved:
                self._wakes[tenant] = now
            self._starved.clear()
            self._cond.notify_all()

    def run_claim(self, claim: Claim) -> bool:
        """Run one claimed attempt and record it; True if the record applied (lease still held)."""
        done = self._run(claim)
        applied = self.store.finish(claim, done.outcome, done.effects, done.finished_at)
        if self._after_record(done, applied):
            self._wake_soon(claim.tenant)
        return applied

    def _run(self, claim: Claim) -> _Finished:
        started, effects, event, t0 = self._prepare(claim)
        return self._finished_run(claim, started, effects, t0, self._call_runner(claim, event, effects))

    def _finished_run(self, claim: Claim, started: datetime, effects: RunEffects, t0: float,
                      result: Any) -> _Finished:
        elapsed = self.clock.monotonic() - t0
        return _Finished(claim, _outcome(result, started, elapsed), effects, self.clock.now(), elapsed)

    def _prepare(self, claim: Claim) -> tuple[datetime, RunEffects, dict, float]:
        """The run's start: its lag metric, its effects buffer and the event the script sees."""
        started = self.clock.now()
        quota_state = getattr(self.store, "quota_state", None)  # not part of the Store protocol
        self.metrics.start_lag.observe(max(0.0, (started - claim.scheduled_for).total_seconds()))
        effects = RunEffects(
            lambda key: self.store.kv_read(claim.tenant, key),
            lambda prefix: self.store.kv_keys(claim.tenant, prefix),
            now=started, job_depth=claim.job_depth,
            quota=(lambda: quota_state(claim.tenant)) if quota_state is not None else None,
        )
        return started, effects, claim.event(started.isoformat().replace("+00:00", "Z")), self.clock.monotonic()

    def _call_runner(self, claim: Claim, event: dict, effects: RunEffects) -> Any:
        try:
            return self.runner.run(claim.source, event, claim.timeout_ms, claim.memory_mb, effects)
        except Exception as exc:
            return _runner_broke(claim, exc)

    # -- recording ----------------------------------------------------------------------

    def _record_loop(self) -> None:
        stopping = False
        while not stopping:
            items = [self._finished.get()]
            if items[0] is not None and self._inflight > 1 and self.record_linger_s > 0:
                # Other runs are out: let a few of them finish too, so that one transaction records
                # many (each transaction costs about as much CPU as a dozen of its records).
                time.sleep(self.record_linger_s)
            while len(items) < RECORD_BATCH:
                try:
                    items.append(self._finished.get_nowait())
                except queue.Empty:
                    break
            stopping = None in items
            done = [item for item in items if item is not None]
            by_tenant: dict[str, list[_Finished]] = {}
            for item in done:
                by_tenant.setdefault(item.claim.tenant, []).append(item)
            for group in by_tenant.values():
                try:
                    self._record(group)
                except Exception:  # never let the recorder die: the slots must come back
                    log.exception("run.record_failed", extra={"event": "run.record_failed"})
                finally:
                    self._release(len(group))

    def _record(self, group: list[_Finished]) -> None:
        """Record a tenant's finished runs in one transaction; if that fails, one by one."""
        try:
            applied: list[bool | None] = list(self.store.finish_many(
                [(d.claim, d.outcome, d.effects, d.finished_at) for d in group]))
        except Exception:
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(group)})
            applied = []
            for d in group:  # one bad record (say, an effect the database refuses) costs only its own run
                try:
                    applied.append(self.store.finish(d.claim, d.outcome, d.effects, d.finished_at))
                except Exception:
                    log.exception("run.record_failed", extra={"event": "run.record_failed", "run_id": d.claim.run_id})
                    applied.append(None)
        wake = False
        for d, ok in zip(group, applied):
            if ok is not None:
                wake = self._after_record(d, ok) or wake
        if wake:
            self._wake_soon(group[0].claim.tenant)  # once for the group: its tenant is the same

    def _after_record(self, done: _Finished, applied: bool) -> bool:
        """Metrics and the run's log line; True if the tenant should be looked at again now."""
        claim, outcome = done.claim, done.outcome
        self.metrics.runs_with(outcome.status if applied else "fenced").inc()
        self.metrics.duration.observe(done.elapsed_s)
        if log.isEnabledFor(logging.INFO):
            log.info("run.finished", extra={
                "event": "run.finished", "tenant": claim.tenant, "run_id": claim.run_id,
                "schedule_id": claim.schedule_id, "job_key": claim.job_key, "attempt": claim.attempt,
                "status": outcome.status, "applied": applied, "duration_ms": outcome.duration_ms,
                "lag_s": round((outcome.started_at - claim.scheduled_for).total_seconds(), 3),
            })
        # Follow-ups, or occurrences queued behind this one, may be due now.
        return applied and bool(done.effects.jobs or claim.schedule_id is not None)

    def _wake_soon(self, tenant: str) -> None:
        if self._thread is not None:
            self.wake(tenant)

    # -- synchronous use (tests, `run now`) ------------------------------------------------

    def tick(self, tenant: str, limit: int = 100) -> list[Claim]:
        """Claim what is due now and run it in this thread; for tests with a manual clock."""
        batch = self.store.claim_due(tenant, self.clock.now(), limit)
        self._count_records(batch.recorded)
        for claim in batch.claims:
            self.run_claim(claim)
        return batch.claims


def _runner_broke(claim: Claim, exc: Exception) -> RunOutcome:
    log.error("run.runner_failed", exc_info=exc, extra={"event": "run.runner_failed", "run_id": claim.run_id})
    return broken(exc)


def _outcome(result: Any, started: datetime, elapsed_s: float) -> Outcome:
    """A runner's result as it will be recorded: checked once, here, so no run can write a broken row."""
    duration = result.duration_ms or int(elapsed_s * 1000)
    status, output, error, logs, reason = storable(result.status, result.output, result.error,
                                                   list(result.logs or []))
    return Outcome(
        status=status, started_at=started, output=output, error=error,
        error_line=result.error_line, logs=logs, duration_ms=duration, reason=reason,
    )
