"""Sandboxes in worker processes: throughput on every core, and a second wall.

``SandboxPool`` has ``Sandbox``'s methods, plus ``submit`` (a run whose result
comes back through a callback), and runs each script in one of N worker
processes (``_poolworker``), each with its own wasmtime engine.  In one
process, wasmtime-py's host callbacks (our WASI host, the bridge) hold the GIL,
so threads cannot use two cores; processes can.

* Dispatch is pull-based.  Jobs wait in the parent; a few at a time go as
  "tickets" into one shared ``SOCK_SEQPACKET`` socket, and whichever worker is
  free takes the next one (each ``recv`` is one whole ticket).  A worker never
  waits for the parent between runs, and a slow script holds up only its own
  worker: nothing is queued behind it.  At most ``TICKETS_PER_WORKER * size``
  runs are ticketed (running or in the socket); the rest wait in the parent.  Which job a worker is
  running, and since when, it writes into a slot of shared memory, so taking a
  ticket costs no message.
* One reactor thread reads every worker's pipe: ``done`` (the run's one
  ``contract.RunResult``, its buffered writes included: a write costs no
  message), and the worker's remote capability calls (reads), which are
  executed on the caller's ``caps`` by a small thread pool, so ``caps`` never
  leaves this process and a slow capability call does not stall the other workers.
  Messages are small JSON, never pickle; a script's source crosses once per
  worker (tickets name it by a token, and a worker fetches sources it lacks).
* Waiting on the network: a capability that ``waits`` (``fetch``) runs on its own thread pool,
  and its worker is "parked" meanwhile: it holds no core, but it cannot take tickets either. So
  that ``size`` workers keep running scripts, the pool starts a spare for each worker parked
  longer than a short grace (at most ``spares`` of them), and lets spares go once they have
  not been needed for a few seconds (``_poolspares``).
* Sharing: jobs are ticketed round robin between their owners (tenants), each with at most
  ``owner_share`` of ``size + spares`` out at once, so that one owner's runs parked on the network
  leave the others workers (``_pooljobs.FairWaiting``); a waiting job's deadline has not begun.
* Recycling: a worker whose run was cut off in the guest's code (``timed_out`` by the deadline's
  interrupt, ``memory_exceeded``), or that has done ``max_runs_per_worker`` runs, exits after it;
  a background thread starts its replacement. A run stopped at a host call costs no process.
* Failure: if a worker dies mid-run (crash, OOM kill) the run ends ``failed``
  with "sandbox worker died"; if it has not answered once its timeout plus
  ``GRACE_S`` have passed (wall time, capability calls included, as for the
  guest's own deadline; counted from when it had its script, and judged only
  after what it wrote has been read: ``_poolwatch``), it is killed and the run
  ends ``timed_out``.  Either
  way the worker is replaced.  A worker that dies while idle costs no run:
  the tickets stay in the socket for the others.

Workers are started with the "forkserver" context (never plain fork: the
platform has threads and database connections); the fork server preloads
this package, and each worker loads the compiled module from ``cache_dir``,
so a new worker costs tens of milliseconds, not a compile.  As with any
multiprocessing start method but fork, the parent's ``__main__`` is imported
once more (in the fork server): it must be importable and guard its work with
``if __name__ == "__main__"``.

The workers run as the parent's user: the process boundary contains crashes,
runaway memory and hangs, not a guest that escaped wasmtime.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import multiprocessing
import os
import select
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Hashable

from . import _engine, _poolworker
from ._pooljobs import FairWaiting, Job, owner_cap, problem_from
from ._poolprocs import Worker, answer_capability, await_ready, retire, spawn
from ._poolspares import LINGER_S, SparesMixin
from ._poolwatch import WATCH_MS, WatchMixin
from ._poolworker import TICKET_HEAD, dump, ticket
from .capabilities import WAITING_METHODS, Capabilities
from .contract import RunRequest, RunResult
from .limits import Limits
from .runtime import CHECK_LIMITS, SyntaxProblem

log = logging.getLogger("almanac.sandbox")

JOIN_S = 60.0
CLOSE_WAIT_S = 5.0  # close() lets runs in flight finish this long, then kills their workers
# Ticketed runs per worker (running or waiting in the socket). Deep enough that a worker still
# finds work while the parent's reactor waits for the GIL (the scheduler's recorder may hold it
# for milliseconds): measured on 2 cores, 4 -> 8 took a 2,000-job burst from ~1,360 to ~1,470
# jobs/s and cut the parent's CPU per job; 16 gained nothing more. A ticket's run may start up
# to this many runs after it was handed over.
TICKETS_PER_WORKER = 8
MAX_MESSAGE = 64 * 1024 * 1024
SOURCE_TOKENS = 512  # distinct sources the parent keeps a token for
DEFAULT_SPARES = 32  # workers started beyond ``size`` while runs wait on the network
DEFAULT_OWNER_SHARE = 0.5  # of the pool's processes one owner's jobs may hold at once


class SandboxPool(SparesMixin, WatchMixin):
    """Runs scripts in worker processes; thread-safe; same API as ``Sandbox``, plus ``submit``."""

    def __init__(self, workers: int | None = None, cache_dir: Path | None = None,
                 max_runs_per_worker: int = 10_000, spares: int = DEFAULT_SPARES,
                 spare_linger_s: float = LINGER_S, owner_share: float = DEFAULT_OWNER_SHARE) -> None:
        self.size = multiprocessing.cpu_count() if workers is None else workers
        if self.size < 1 or max_runs_per_worker < 1 or spares < 0 or not 0 < owner_share <= 1:
            raise ValueError("workers and max_runs_per_worker must be at least 1, spares at least 0, "
                             "owner_share in (0, 1]")
        self.spares = spares
        self.spare_linger_s = spare_linger_s  # how long spares stay once the waits are over
        self._parked = 0  # workers waiting on a capability that waits (fetch)
        self._spawning = 0  # spares being started
        self._surplus_since: float | None = None  # since when more than ``size`` workers are unparked
        self.max_runs_per_worker = max_runs_per_worker
        self._own_cache = cache_dir is None
        self._cache_dir = Path(tempfile.mkdtemp(prefix="almanac-sandbox-")) if cache_dir is None \
            else Path(cache_dir)
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["__main__", _poolworker.__name__])
        self._lock = threading.Lock()
        self._jobs: dict[int, Job] = {}
        # Not yet ticketed, per owner. The cap is never below `size`: without spares one owner still uses every worker.
        self._waiting = FairWaiting(max(self.size, owner_cap(self.size + spares, owner_share)))
        self._out = 0  # ticketed jobs not yet ended: running, or waiting in the socket
        self._ids = itertools.count(1)
        self._tokens: OrderedDict[str, int] = OrderedDict()
        self._token_ids = itertools.count(1)
        self._workers: dict[int, Worker] = {}  # by pipe fd; the reactor's own
        self._arrivals: list[Worker] = []  # started by a background thread, for the reactor to adopt
        self._background: set[threading.Thread] = set()
        self._lost_idle_at: float | None = None
        # Workers replaced since start: recycled (they said why and exited: a trap, max runs) or
        # lost (died or hung without saying so). Read by the platform's /metrics (SPEC section 13).
        self._recycled = 0
        self._lost = 0
        self._next_watch = 0.0
        self._closed = False
        self._tickets_out, self._tickets_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._tickets_out.setblocking(False)  # the parent never waits on the socket; workers do
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._caps = ThreadPoolExecutor(self.size, thread_name_prefix="almanac-sandbox-caps")
        # A thread per parked worker at most: every worker may wait on the network at once.
        self._waits = ThreadPoolExecutor(self.size + spares, thread_name_prefix="almanac-sandbox-waits")
        self._reactor = threading.Thread(target=self._react, name="almanac-sandbox-pool", daemon=True)
        try:
            self._start_all()
        except BaseException:
            self._shutdown_now()
            raise
        self._reactor.start()
        _open_pools.add(self)

    # --- the Sandbox API ------------------------------------------------------

    def submit(self, request: RunRequest, caps: Capabilities, done: Callable[[RunResult], None],
               owner: Hashable = None) -> None:
        """Queue a run; ``done(result)`` is called once, on the pool's thread, when it ends.

        ``owner`` (a tenant) shares the workers with the other owners (see "Sharing" above).
        Never raises for the script's sake; raises RuntimeError if the pool is closed.
        ``done`` must be quick and must not raise (it is logged and dropped if it does).
        """
        self._enqueue("run", request, caps, done, owner)

    def execute(self, request: RunRequest, caps: Capabilities) -> RunResult:
        """Run the request in a worker and wait for its result; never raises for the script's sake."""
        return self._wait_for("run", request, caps)

    def run(self, source: str, event: dict, limits: Limits, caps: Capabilities) -> RunResult:
        """``execute`` of the request these make (every capability allowed)."""
        return self.execute(RunRequest(source, event, limits), caps)

    def check_syntax(self, source: str) -> SyntaxProblem | None:
        """Parse ``source`` as a module (in a worker) without running it."""
        return self._wait_for("check", RunRequest(source, {}, CHECK_LIMITS, frozenset()), None)

    def worker_pids(self) -> list[int]:
        """Process ids of the workers now started."""
        with self._lock:
            return sorted(w.process.pid for w in [*self._workers.values(), *self._arrivals])

    def worker_counts(self) -> dict[str, int]:
        """Workers alive now, and how many were recycled or lost since the pool started."""
        with self._lock:
            alive = len(self._workers) + len(self._arrivals)
            return {"alive": alive, "recycled": self._recycled, "lost": self._lost}

    def close(self) -> None:
        """Refuse new work; let runs in flight finish (up to ``CLOSE_WAIT_S``); stop the workers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unstarted = self._waiting.drain() + self._take_back_tickets()
        for job in unstarted:
            self._finish(job, job.ended("failed", "sandbox pool is closed"))
        self._tickets_out.close()  # a worker exits once its run is done and the socket is empty
        self._wake()
        self._reactor.join(CLOSE_WAIT_S)
        self._shutdown_now()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- jobs -----------------------------------------------------------------

    def _wait_for(self, kind: str, request: RunRequest, caps: Capabilities | None) -> Any:
        answered = threading.Event()
        box: list[Any] = []

        def done(result: Any) -> None:
            box.append(result)
            answered.set()

        self._enqueue(kind, request, caps, done)
        answered.wait()
        return box[0]

    def _enqueue(self, kind: str, request: RunRequest, caps: Capabilities | None,
                 done: Callable[[Any], None], owner: Hashable = None) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("sandbox pool is closed")
            job = Job(next(self._ids), kind, request, caps, done, owner)
            self._jobs[job.id] = job
            self._waiting.append(job)
            self._fill()  # from this thread: the reactor need not wake to hand it out

    def _fill(self) -> None:
        """(Holding the lock.) Ticket waiting jobs, round robin between owners under their cap, while fewer
        than ``TICKETS_PER_WORKER * size`` are out (plus one per parked worker: its run is out, but it
        takes no ticket)."""
        while self._waiting and self._out < TICKETS_PER_WORKER * self.size + self._parked:
            job = self._waiting.next()
            if job is None:
                return  # every owner with waiting jobs is at its cap: one of theirs ending tries again
            try:
                self._tickets_out.send(ticket(job.id, job.kind, self._token(job.request.source), job.request))
            except (BlockingIOError, OSError):
                return  # the socket is full (or closing): the next done or submit tries again
            self._waiting.ticketed(job)
            job.state = "ticketed"
            self._out += 1

    def _token(self, source: str) -> int:
        token = self._tokens.get(source)
        if token is None:
            token = self._tokens[source] = next(self._token_ids)
            if len(self._tokens) > SOURCE_TOKENS:
                self._tokens.popitem(last=False)
        else:
            self._tokens.move_to_end(source)
        return token

    def _take_back_tickets(self) -> list[Job]:
        """(Holding the lock, closing.) Empty the socket; the jobs its tickets named."""
        jobs = []
        while True:
            try:
                data = self._tickets_in.recv(64 * 1024, socket.MSG_DONTWAIT)
            except (BlockingIOError, OSError):
                return jobs
            job = self._jobs.get(TICKET_HEAD.unpack_from(data)[0])
            if job is not None:
                jobs.append(job)

    def _finish(self, job: Job, result: Any) -> None:
        with self._lock:
            if self._jobs.pop(job.id, None) is None:
                return  # already ended (a done racing a failure)
            if job.state == "ticketed":
                self._out -= 1
                self._waiting.ended(job)
        try:
            job.done(result)
        except Exception:
            log.exception("sandbox.callback_failed")

    # --- the reactor ------------------------------------------------------------

    def _react(self) -> None:
        while True:
            for fd, _ in self._poller.poll(self._poll_ms()):
                if fd == self._wake_r:
                    _drain_pipe(self._wake_r)
                elif fd in self._workers:
                    self._read(self._workers[fd])
            if self._arrivals:
                self._adopt()
            now = time.monotonic()
            if now >= self._next_watch:  # not on every wake-up: a burst wakes the reactor ~2,000 times a second
                self._next_watch = now + WATCH_MS / 1000
                self._watch(now)
            with self._lock:
                self._fill()
                if self._closed and not self._workers and not self._arrivals:
                    return

    def _poll_ms(self) -> int:
        # Runs start without a message: while any is out, look at the workers' slots often.
        return WATCH_MS if self._out else 1000

    def _read(self, worker: Worker) -> None:
        """Handle what the worker has written so far (one read: a bounded number of messages)."""
        try:
            messages = worker.messages(MAX_MESSAGE)
        except (EOFError, OSError):
            self._lose(worker, "died")
            return
        for data in messages:
            try:
                self._handle(worker, json.loads(data))
            except (EOFError, OSError):  # answering it: its pipe is gone
                self._lose(worker, "died")
                return
            except (ValueError, TypeError, KeyError, IndexError, RecursionError):  # not JSON, or not the expected shape
                worker.process.kill()
                self._lose(worker, "malformed")
                return
            if worker.fd not in self._workers:
                return

    def _handle(self, worker: Worker, message: list) -> None:
        kind, job_id = message[0], message[1]
        if kind == "bye":
            worker.retiring = str(job_id)
            return
        with self._lock:
            job = self._jobs.get(job_id)
        if kind in ("done", "checked"):
            worker.runs += 1
            if job is not None:
                if kind != ("done" if job.kind == "run" else "checked") or job.state != "ticketed":
                    raise ValueError(kind)
                self._finish(job, RunResult.from_wire(message[2]) if kind == "done" else problem_from(message[2]))
            with self._lock:
                self._fill()
            return
        if job_id != worker.running()[0]:
            raise ValueError("a request for a job this worker is not running")
        if kind == "fetch":
            reply = ["v", job.request.to_wire()] if job is not None else ["x", "gone"]
            worker.send(dump(reply))
            worker.handed = (job_id, time.monotonic())  # its run's clock starts now (``_poolwatch``)
        elif kind == "cap":
            method, args = message[2], message[3]
            caps = job.caps if job is not None else None
            if method in WAITING_METHODS:
                self._park(worker)
                self._waits.submit(self._answer_waiting, worker, caps, method, args)
            else:
                self._caps.submit(answer_capability, worker, caps, method, args)
        else:
            raise ValueError(kind)

    def _lose(self, worker: Worker, why: str) -> None:
        """The worker is gone (or going): fail its run, if any, and start a replacement."""
        with self._lock:  # worker_pids() reads the dict from other threads
            if self._workers.pop(worker.fd, None) is None:
                return
            if worker.parked:
                worker.parked = False
                self._parked -= 1
            # A surplus worker leaves unreplaced, unless runs parked since it was told to go.
            surplus = worker.retiring == "surplus" and self._live() - self._parked >= self.size
        self._poller.unregister(worker.fd)
        reason = "closed" if self._closed else why if worker.retiring is None or why != "died" else worker.retiring
        if not self._closed:
            recycled = worker.retiring is not None and why == "died"  # it said why, then exited
            with self._lock:
                self._recycled += recycled
                self._lost += not recycled
        job_id, started = worker.running()
        if job_id:
            with self._lock:
                job = self._jobs.get(job_id)
            if job is not None:
                elapsed = int((time.monotonic() - started) * 1000)
                self._finish(job, job.ended("timed_out", f"timed out after {job.request.limits.timeout_ms} ms", elapsed)
                             if why == "hung" else job.ended("failed", "sandbox worker died", elapsed))
        elif worker.retiring is None:
            self._lost_idle_at = time.monotonic()  # it may have taken a ticket without saying so
        if surplus:
            self._in_background(retire, worker, reason)
        else:
            self._in_background(self._replace, worker, reason)

    def _adopt(self) -> None:
        with self._lock:
            arrivals, self._arrivals = self._arrivals, []
            for worker in arrivals:
                self._workers[worker.fd] = worker
        for worker in arrivals:
            self._poller.register(worker.fd, select.POLLIN)
            if worker.poller.poll(0):
                self._read(worker)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # already awake (the pipe is full) or closed

    # --- worker lifecycle -----------------------------------------------------

    def _start_all(self) -> None:
        starting: list[Worker] = []
        try:
            if not _engine.cached_image(self._cache_dir).exists():
                # One worker compiles and fills the cache; the rest then load it.
                starting.append(await_ready(self._spawn()))
            ready = len(starting)
            while len(starting) < self.size:
                starting.append(self._spawn())
            for worker in starting[ready:]:
                await_ready(worker)
        except BaseException:
            for worker in starting:
                retire(worker, "start failed")
            raise
        for worker in starting:
            self._workers[worker.fd] = worker
            self._poller.register(worker.fd, select.POLLIN)

    def _spawn(self) -> Worker:
        return spawn(self._ctx, self._tickets_in, self._cache_dir, self.max_runs_per_worker)

    def _replace(self, old: Worker, why: str) -> None:
        retire(old, why)
        delay = 0.1
        while not self._closed:
            try:
                worker = await_ready(self._spawn())
            except Exception:
                log.exception("sandbox.worker_start_failed")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            with self._lock:
                if not self._closed:
                    self._arrivals.append(worker)
                    worker = None
            if worker is not None:
                retire(worker, "closed")
            self._wake()
            return

    def _in_background(self, target: Callable[..., None], *args: Any) -> None:
        def body() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._background.discard(thread)

        thread = threading.Thread(target=body, name="almanac-sandbox-pool-start", daemon=True)
        with self._lock:
            self._background.add(thread)
        thread.start()

    def _shutdown_now(self) -> None:
        """Kill what is left (after ``close``'s wait, or a failed start) and release everything."""
        self._closed = True
        for worker in [*self._workers.values(), *self._arrivals]:
            worker.process.kill()
        if self._reactor.is_alive():
            self._reactor.join(JOIN_S)
        for worker in [*self._workers.values(), *self._arrivals]:
            self._workers.pop(worker.fd, None)
            retire(worker, "closed")
        self._arrivals.clear()
        with self._lock:
            left = list(self._jobs.values())
            background = list(self._background)
        for job in left:
            self._finish(job, job.ended("failed", "sandbox pool is closed"))
        for thread in background:
            thread.join(JOIN_S)
        self._caps.shutdown(wait=True)
        self._waits.shutdown(wait=True)
        for end in (self._tickets_out, self._tickets_in):
            end.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._own_cache:
            shutil.rmtree(self._cache_dir, ignore_errors=True)


_open_pools: "weakref.WeakSet[SandboxPool]" = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    # Before multiprocessing's own exit handler (registered earlier, so run later) terminates
    # the workers: the reactor would otherwise see them die and start replacements.
    for pool in list(_open_pools):
        pool.close()


def _drain_pipe(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass
