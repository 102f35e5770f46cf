"""The composition root: wires the database, the clock, the sandbox and the scheduler.

`build_services()` is called by `almanac serve` (through the web app factory) and by
`almanac worker`; nothing else constructs these parts. This is the one place where
the platform meets the sandbox: `SandboxRunner` fills the platform's `Runner`
protocol with it. Both speak the sandbox's one run contract (`RunRequest` in,
`RunResult` out), so nothing is converted here: the run's remote calls for fetch and
secrets go to its `RunOutbound` (`almanac.outbound`), which adds the run's fetch records
(`RunResult.http`) to its result and redacts secret values from what is stored.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from almanac.db import Database
from almanac.egress.fetch import FetchError
from almanac.outbound import Outbound, RunOutbound
from almanac.delivery.dispatcher import Dispatcher
from almanac.platform.timer.admission import Admission
from almanac.platform.clock import Clock, SystemClock
from almanac.platform.timer.liveness import Liveness, owner_of
from almanac.platform.notify import Listener, Notifier, notify_in
from almanac.platform.runner import broken
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.claim_paths import AcrossTenants
from almanac.platform.timer.scheduler import IDLE_S, Scheduler, across_tenants
from almanac.platform.timer.tenant_leases import TenantLeases
from almanac.retention import Pruner
from almanac.sandbox.capabilities import CapabilityError, ForwardingCapabilities
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.settings import Settings
from almanac.tenants.registry import list_slugs

log = logging.getLogger("almanac.worker")


# Work due further ahead than this needs no NOTIFY (see `Services.wake_at_commit`): twice a timer's
# longest sleep, for clocks of different machines that disagree a little.
NOTIFY_HORIZON = timedelta(seconds=2 * IDLE_S)


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    scheduler: Any = None  # the timer pool, with start(), stop(), wake(slug)
    runner: Any = None  # the platform's Runner, backed by the sandbox
    store: Any = None  # the platform's Store (SqlStore)
    admission: Any = None  # runs started by a request (run now, a trial): `platform.admission.Admission`
    extras: dict[str, Any] = field(default_factory=dict)

    def wake(self, slug: str) -> None:
        """After a commit that changed what is planned for `slug`: wake this process's timer and every other's."""
        if self.scheduler is not None:
            self.scheduler.wake(slug)
        notifier = self.extras.get("notifier")
        if notifier is not None:
            notifier.notify(slug)  # PostgreSQL: the owner of the tenant's timer looks at it now

    def wake_at_commit(self, session: Any, background: Any, slug: str, due_at: datetime | None = None) -> None:
        """`wake`, for a request whose unit of work is `session`: every process's wake-up is sent in
        that transaction (PostgreSQL NOTIFY, delivered at the commit), this process's timer is woken
        by `background` (FastAPI's BackgroundTasks, after the commit).

        `due_at`: when the earliest work the request planned falls due, if known. Work due later than
        `NOTIFY_HORIZON` needs no NOTIFY: every timer looks at the due index at least every `IDLE_S`
        and then sleeps only until the earliest due time it saw (a "remind in 3 days" job sent one
        NOTIFY a PUT, a statement of its own, for nothing)."""
        if self.notify_needed(due_at):
            notify_in(session, slug)
        if self.scheduler is not None:
            background.add_task(self.scheduler.wake, slug)

    def notify_needed(self, due_at: datetime | None) -> bool:
        """Whether work due at `due_at` (None: not known) needs the other processes woken (see `wake_at_commit`)."""
        return self.extras.get("notifier") is not None and (
            due_at is None or due_at <= self.clock.now() + NOTIFY_HORIZON)

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.runner is not None and hasattr(self.runner, "close"):
            self.runner.close()
        self.db.dispose()


class _SandboxCaps(ForwardingCapabilities):
    """A run's remote calls: its tenant's reads (`effects.TenantReads`), and its outbound reach
    (fetch, secrets), raising the sandbox's error class. Writes never come here: the sandbox
    buffers them and hands them back with the run's result."""

    def __init__(self, inner: Any, outbound: RunOutbound | None = None) -> None:
        self._inner, self._outbound = inner, outbound

    def _call(self, name: str, *args: Any) -> Any:
        try:
            if name in OUTBOUND_METHODS:
                if self._outbound is None:
                    raise FetchError("fetch: this runner has no network", "refused") if name == "fetch" else \
                        FetchError("secrets: this runner has none", "refused")
                return getattr(self._outbound, name)(*args)
            return getattr(self._inner, name)(*args)
        except FetchError as exc:
            raise CapabilityError(str(exc)) from None


OUTBOUND_METHODS = ("fetch", "secrets_get")


class SandboxRunner:
    """The platform's Runner on the wasmtime + QuickJS sandbox (built on first use).

    With `processes` > 0 (default: one per core; `Settings.sandbox_processes`) scripts
    run in a `SandboxPool` of worker processes, so runs use every core; with 0 they
    run in this process (`Sandbox`), where threads cannot use a second core.
    """

    def __init__(self, cache_dir: Path | None, processes: int | None = None, outbound: Outbound | None = None,
                 spares: int | None = None, tenant_share: float | None = None) -> None:
        self._cache_dir = cache_dir
        self.outbound = outbound  # fetch and secrets; without it scripts' fetch rejects and secrets are null
        self.spares = spares
        self.tenant_share = tenant_share  # of the pool's processes one tenant's runs may hold at once
        self.processes = sandbox_processes(processes)
        self._sandbox: Any = None  # in-process: the fallback, and the bridge while the pool starts
        self._pool: Any = None
        self._starting: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # in-process runs started by `submit`

    def runs_in_flight(self) -> int | None:
        """Runs the timer should keep out at once to keep the pool's workers busy (None: its default).

        The pool tickets up to `TICKETS_PER_WORKER` (8) runs per worker, so that a worker that
        finishes finds its next run at once; a few more wait in the pool, ready to be ticketed.
        """
        return 10 * self.processes if self.processes > 0 else None

    def start(self) -> None:
        """Start the pool's processes in the background (they take seconds); runs meanwhile go in-process."""
        with self._lock:
            if self.processes > 0 and self._pool is None and self._starting is None and not self._closed:
                self._starting = threading.Thread(target=self._start_pool, name="almanac-sandbox-start", daemon=True)
                self._starting.start()

    def prepare(self) -> None:
        """Start the pool and wait until it runs scripts (the scheduler calls this before claiming)."""
        self.start()
        if self.processes > 0 and not self.ready(PREPARE_TIMEOUT_S):
            log.warning("worker.sandbox_pool_slow", extra={"event": "worker.sandbox_pool_slow"})

    def ready(self, timeout: float | None = None) -> bool:
        """Wait for the pool started by `start()`; True once scripts run in it."""
        with self._lock:
            starting = self._starting
        if starting is not None:
            starting.join(timeout)
        with self._lock:
            return self._pool is not None

    def worker_pids(self) -> list[int]:
        """The sandbox pool's worker processes now alive (none before the pool starts, or in-process)."""
        with self._lock:
            pool = self._pool
        return pool.worker_pids() if pool is not None else []

    def worker_counts(self) -> dict[str, int]:
        """The pool's workers alive, recycled and lost (all 0 before the pool starts, or in-process)."""
        with self._lock:
            pool = self._pool
        return pool.worker_counts() if pool is not None else {"alive": 0, "recycled": 0, "lost": 0}

    def _start_pool(self) -> None:
        from almanac.sandbox import SandboxPool  # deferred: wasmtime loads only when scripts are to run
        from almanac.sandbox.pool import DEFAULT_OWNER_SHARE, DEFAULT_SPARES  # deferred: as the line above

        try:
            pool = SandboxPool(workers=self.processes, cache_dir=self._cache_dir,
                               spares=DEFAULT_SPARES if self.spares is None else self.spares,
                               owner_share=DEFAULT_OWNER_SHARE if self.tenant_share is None else self.tenant_share)
        except Exception:
            log.exception("worker.sandbox_pool_failed", extra={"event": "worker.sandbox_pool_failed"})
            return  # scripts keep running in-process
        with self._lock:
            if not self._closed:
                self._pool, pool = pool, None
        if pool is not None:
            pool.close()
        else:
            log.info("worker.sandbox_pool_ready", extra={"event": "worker.sandbox_pool_ready",
                                                         "processes": self.processes})

    def _get(self) -> Any:
        self.start()
        with self._lock:
            if self._pool is not None:
                return self._pool
            if self._sandbox is None:
                from almanac.sandbox import Sandbox  # deferred: as in `_start_pool`

                self._sandbox = Sandbox(self._cache_dir)
            return self._sandbox

    def run(self, request: RunRequest, caps: Any) -> RunResult:
        wrapped, reach = self._caps(caps, request.limits.timeout_ms)
        return self._finished(self._get().execute(request, wrapped), reach)

    def _caps(self, caps: Any, timeout_ms: int) -> tuple[_SandboxCaps, RunOutbound | None]:
        tenant = getattr(caps, "tenant", None)
        reach = self.outbound.for_run(tenant, timeout_ms) if self.outbound is not None and tenant else None
        return _SandboxCaps(caps, reach), reach

    @staticmethod
    def _finished(result: RunResult, reach: RunOutbound | None) -> RunResult:
        """The sandbox's result with its fetch records, and secret values redacted from what is stored."""
        return result if reach is None else reach.finish(result)

    def submit(self, request: RunRequest, caps: Any, done: Callable[[RunResult], None]) -> None:
        """Start a run; `done(result)` when it ends (the pool's thread, or one of ours in-process)."""
        target = self._get()
        if not hasattr(target, "submit"):  # in-process: a thread waits on the run
            self._threads().submit(self._run_then, done, request, caps)
            return
        wrapped, reach = self._caps(caps, request.limits.timeout_ms)
        # The pool shares its processes between tenants: runs of one waiting on the network leave the rest.
        target.submit(request, wrapped, lambda result: done(self._finished(result, reach)),
                      owner=getattr(caps, "tenant", None))

    def _run_then(self, done: Callable[[RunResult], None], request: RunRequest, caps: Any) -> None:
        """On a thread: run, then always call back (the scheduler counts the run out until then)."""
        try:
            result = self.run(request, caps)
        except Exception as exc:
            log.exception("worker.run_failed", extra={"event": "worker.run_failed"})
            result = broken(exc)
        done(result)

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max(2, os.cpu_count() or 2),
                                                    thread_name_prefix="almanac-run")
            return self._executor

    def check_syntax(self, source: str) -> tuple[str, int | None, int | None] | None:
        problem = self._get().check_syntax(source)
        return None if problem is None else (problem.message, problem.line, problem.column)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting, self._starting = self._starting, None
            parts, self._pool, self._sandbox = [self._pool, self._sandbox], None, None
            executor, self._executor = self._executor, None
        if starting is not None:
            starting.join(60)
        if executor is not None:
            executor.shutdown(wait=True)
        for part in parts:
            if part is not None:
                part.close()


PREPARE_TIMEOUT_S = 60.0  # past this the scheduler claims anyway; runs go in-process until the pool is up


def sandbox_processes(configured: int | None) -> int:
    """Sandbox worker processes: as configured, or one per core when not (0 runs scripts in-process)."""
    return configured if configured is not None else (os.cpu_count() or 1)


class ScaledScheduler:
    """The timer with its scale-out companions, started and stopped together.

    On PostgreSQL the timer claims across all tenants from the shared due index, the
    tenants it holds `TenantLeases` for first, and the leases spread the tenants'
    deliveries over the processes; on SQLite
    it decides which tenants the timer looks at (all of them). The `Listener`
    (PostgreSQL only) wakes the timer when another process NOTIFYs a change, and
    re-wakes it after reconnecting. The `Liveness` shows this process alive from
    before its first claim until its last run is recorded, and makes the running
    attempts of processes that died due again (waking the timer for them).
    Everything else (`tick`, `run_claim`, ...) is the timer's own.
    """

    def __init__(self, timer: Scheduler, leases: TenantLeases, db: Database, dispatcher: Any = None,
                 pruner: Any = None, liveness: Liveness | None = None) -> None:
        self.timer, self.leases, self.dispatcher, self.pruner = timer, leases, dispatcher, pruner
        self.liveness = liveness
        self.listener = Listener.for_database(db, self.wake, on_connect=self._wake_all)

    def start(self) -> None:
        if self.liveness is not None:  # alive before the first claim; the dead's runs due before the first look
            self.liveness.start()
        self.leases.start()  # a first share before the timer's first look at its tenants
        self.timer.start()
        if self.dispatcher is not None:
            self.dispatcher.start()  # delivers the events that runs commit
        if self.pruner is not None:
            self.pruner.start()  # history past its retention, in small batches
        if self.listener is not None:
            self.listener.start()

    def start_serving(self) -> None:
        """A server without the scheduler (`serve --no-scheduler`) still runs what its requests start, in
        its own pool: it shows itself alive like a worker, so that if it dies those runs are taken up by
        a worker within the liveness window, not when their leases lapse."""
        if self.liveness is not None:
            self.liveness.start()

    def stop(self, timeout: float = 30.0) -> None:
        if self.listener is not None:
            self.listener.stop()
        if self.pruner is not None:
            self.pruner.stop()
        if self.dispatcher is not None:
            self.dispatcher.stop()
        self.timer.stop(timeout)
        self.leases.stop()  # hand the tenants over at once rather than when the leases lapse
        if self.liveness is not None:  # last: while runs were out, the others had to see this process alive
            self.liveness.stop()

    def wake_tenants(self, slugs: list[str]) -> None:
        """Look at these tenants now (the runs of a dead process were made due in them)."""
        for slug in slugs:
            self.wake(slug)

    def wake(self, slug: str) -> None:
        # The cross-tenant timer claims any tenant's due work: a change anywhere is its business.
        if isinstance(self.timer.path, AcrossTenants) or self.leases.owns(slug):
            self.timer.wake(slug)

    def _wake_all(self) -> None:
        if isinstance(self.timer.path, AcrossTenants):
            self.timer.wake("")  # one look at the whole index
            return
        for slug in self.leases.owned():
            self.timer.wake(slug)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.timer, name)


def build_services(settings: Settings, *, clock: Clock | None = None, runner: Any = None) -> Services:
    clock = clock or SystemClock()
    db = Database(settings)
    store = SqlStore(db, lease_margin_s=settings.lease_margin_s)
    runner = runner or SandboxRunner(settings.var_dir / "cache", settings.sandbox_processes,
                                     outbound=Outbound(db, settings), spares=settings.sandbox_spare_workers,
                                     tenant_share=settings.tenant_max_share)
    in_flight = runner.runs_in_flight() if hasattr(runner, "runs_in_flight") else None
    holder: list[Scheduler] = []
    # One row a process in `worker_heartbeats`: the tenant leases count it, the liveness reaps it once dead.
    leases = TenantLeases(db, lambda: list_slugs(db), on_gained=lambda slug: holder[0].wake(slug),
                          ttl_s=settings.timer_lease_s, owner=owner_of(store.owner_tag))
    timer_options: dict[str, Any] = dict(workers=in_flight, tenant_max_share=settings.tenant_max_share,
                                         parallel=getattr(runner, "processes", None))
    if db.is_sqlite:  # a tenant is a file of its own: the timer looks at each (all of them: one process)
        timer = Scheduler(store, runner, clock, leases.owned, **timer_options)
    else:  # one claim across every tenant from the shared due index; the tenants it holds leases for first
        timer = across_tenants(store, runner, clock, leases.owned, **timer_options,
                               tenant_exists=lambda slug: slug in set(list_slugs(db)))
    holder.append(timer)
    admission = Admission(store, timer, settings.run_now_waiting_max)
    timer.watcher = admission  # runs admitted by a request share the timer's slots and recorder
    # Deliveries are claimed with leases too, so following the timer's tenants only spreads the work. On
    # PostgreSQL a pass looks only at the tenants whose writes signalled work (a signal is settled once its
    # tenant was looked at, so one taken by a dispatcher that died falls due again).
    dispatcher = Dispatcher(db, clock, settings, leases.owned, signals=not db.is_sqlite)
    # Pruning follows the timer's tenants too: each tenant's history is pruned by one process at a time.
    pruner = Pruner(db, clock, leases.owned, settings.retention_days, settings.prune_interval_s,
                    batch=settings.prune_batch)
    woken: list[ScaledScheduler] = []
    liveness = Liveness(db, store.owner_tag, lambda: list_slugs(db), clock, ttl_s=settings.timer_lease_s,
                        on_reaped=lambda slugs: woken[0].wake_tenants(slugs))
    scheduler = ScaledScheduler(timer, leases, db, dispatcher, pruner, liveness)
    woken.append(scheduler)
    return Services(settings=settings, db=db, clock=clock, scheduler=scheduler, runner=runner, store=store,
                    admission=admission,
                    extras={"notifier": Notifier(db), "leases": leases, "dispatcher": dispatcher, "pruner": pruner,
                            "liveness": liveness})


STOP_POLL_S = 0.5  # how soon the main thread sees a stop signal another thread received


def run_worker(settings: Settings) -> None:
    """`almanac worker`: the scheduler and script runner alone, until SIGINT or SIGTERM."""
    services = build_services(settings)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    services.scheduler.start()
    log.info("worker.started", extra={"event": "worker.started", "pid": os.getpid()})
    try:
        # Timed, not `stop.wait()`: the kernel hands a process's SIGTERM to any of its threads, and Python runs
        # the handler in the main thread only once that thread runs Python code again. Blocked in an untimed
        # wait, it never did when the signal landed on the timer's or the listener's thread.
        while not stop.wait(STOP_POLL_S):
            pass
    finally:
        services.close()
        log.info("worker.stopped", extra={"event": "worker.stopped"})
