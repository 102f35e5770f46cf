"""Sandboxes in worker processes: throughput on every core, and a second wall.

``SandboxPool`` has ``Sandbox``'s methods but runs each script in one of N
worker processes (``_poolworker``), each with its own wasmtime engine.  In one
process, wasmtime-py's host callbacks (our WASI host, the bridge) hold the GIL,
so threads cannot use two cores; processes can.

* Dispatch: ``run`` takes a free worker (waiting while all are busy), sends
  the job down its pipe, and serves the worker's capability calls on the
  calling thread against the ``caps`` it was given, so ``caps`` never leaves
  this process.  Messages are small JSON, never pickle.
* Recycling: a worker whose run ended ``timed_out`` or ``memory_exceeded``,
  or that has done ``max_runs_per_worker`` runs, is retired and a fresh one
  started by a background thread; the caller does not wait for it.
* Failure: if a worker dies mid-run (crash, OOM kill) the run ends ``failed``
  with "sandbox worker died"; if it has not answered once its timeout plus
  ``GRACE_S`` have passed (wall time, capability calls included, as for the
  guest's own deadline), it is killed and the run ends ``timed_out``.  Either
  way the worker is replaced.  A worker found dead before it got the job
  costs no run: the job goes to another worker.

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

import json
import logging
import math
import multiprocessing
import select
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from . import _engine, _poolworker
from ._poolworker import CAP_METHODS, dump, result_from
from .capabilities import Capabilities, CapabilityError
from .limits import Limits
from .runtime import CHECK_LIMITS, RunResult, SyntaxProblem

log = logging.getLogger("almanac.sandbox")

GRACE_S = 2.0  # past a run's own deadline before the parent kills its worker
START_TIMEOUT_S = 60.0
MAX_MESSAGE = 64 * 1024 * 1024
RECYCLE_AFTER = ("timed_out", "memory_exceeded")


class _Lost(Exception):
    """The worker died, hung or spoke nonsense; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Worker:
    def __init__(self, process: Any, conn: Any) -> None:
        self.process = process  # multiprocessing.Process
        self.conn = conn  # multiprocessing.connection.Connection
        self.runs = 0
        self.retired = False
        self.exitcode: int | None = None
        # Connection.poll builds a selector per call; a poll object is ~10x cheaper.
        self.poller = select.poll()
        self.poller.register(conn.fileno(), select.POLLIN)

    def wait(self, seconds: float) -> bool:
        """True once a message (or EOF) is readable, False after ``seconds``."""
        return bool(self.poller.poll(max(0, math.ceil(seconds * 1000))))


class SandboxPool:
    """Runs scripts in worker processes; thread-safe; same API as ``Sandbox``."""

    def __init__(self, workers: int | None = None, cache_dir: Path | None = None,
                 max_runs_per_worker: int = 10_000) -> None:
        self.size = multiprocessing.cpu_count() if workers is None else workers
        if self.size < 1 or max_runs_per_worker < 1:
            raise ValueError("workers and max_runs_per_worker must be at least 1")
        self.max_runs_per_worker = max_runs_per_worker
        self._own_cache = cache_dir is None
        self._cache_dir = Path(tempfile.mkdtemp(prefix="almanac-sandbox-")) if cache_dir is None \
            else Path(cache_dir)
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["__main__", _poolworker.__name__])
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._background: set[threading.Thread] = set()
        self._closed = False
        try:
            self._start_all()
        except BaseException:
            self.close()
            raise

    # --- the Sandbox API ------------------------------------------------------

    def run(self, source: str, event: dict, limits: Limits, caps: Capabilities) -> RunResult:
        """Run the script's default export on ``event`` in a worker; never raises for the script's sake."""
        request = dump(["run", source, event, vars(limits)])  # asdict() deep-copies: slower
        started = time.monotonic()
        try:
            reply = self._call(request, caps, limits.timeout_ms, "done")
        except _Lost as lost:
            duration = int((time.monotonic() - started) * 1000)
            if lost.reason == "hung":
                return _ended("timed_out", f"timed out after {limits.timeout_ms} ms", duration)
            return _ended("failed", "sandbox worker died", duration)
        return reply

    def check_syntax(self, source: str) -> SyntaxProblem | None:
        """Parse ``source`` as a module (in a worker) without running it."""
        try:
            return self._call(dump(["check", source]), None, CHECK_LIMITS.timeout_ms, "checked")
        except _Lost:
            return SyntaxProblem("the sandbox could not check this script", 1, 1)

    def worker_pids(self) -> list[int]:
        """Process ids of the workers now started (idle or busy)."""
        with self._cond:
            return sorted(w.process.pid for w in [*self._idle, *self._busy])

    def close(self) -> None:
        """Stop idle workers now and busy ones when their run ends; idempotent."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
            background = list(self._background)
        for worker in idle:
            _retire(worker, "closed")
        for thread in background:
            thread.join(START_TIMEOUT_S)
        if self._own_cache:
            shutil.rmtree(self._cache_dir, ignore_errors=True)

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- dispatch -------------------------------------------------------------

    def _call(self, request: bytes, caps: Capabilities | None, timeout_ms: int, answer: str) -> Any:
        for attempt in range(self.size + 1):
            try:
                return self._call_once(request, caps, timeout_ms, answer)
            except _Lost as lost:
                # A worker that died while idle never saw the job: try another.
                if lost.reason != "gone" or attempt == self.size:
                    raise
        raise AssertionError("unreachable")

    def _call_once(self, request: bytes, caps: Capabilities | None, timeout_ms: int,
                   answer: str) -> Any:
        worker = self._checkout()
        recycle: str | None = "interrupted"  # unless the exchange ends normally
        try:
            kind, value = self._exchange(worker, request, caps, timeout_ms / 1000 + GRACE_S)
            if kind != answer:
                raise ValueError(kind)
            reply = result_from(value) if kind == "done" else _problem_from(value)
            recycle = reply.status if isinstance(reply, RunResult) and reply.status in RECYCLE_AFTER \
                else None
            return reply
        except _Lost as lost:
            recycle = lost.reason
            raise
        except (EOFError, OSError):
            recycle = "died"
            raise _Lost("died") from None
        except (ValueError, TypeError, KeyError, IndexError):  # not JSON, or not the expected shape
            recycle = "malformed"
            raise _Lost("malformed") from None
        finally:
            self._checkin(worker, recycle)

    def _exchange(self, worker: _Worker, request: bytes, caps: Capabilities | None,
                  budget: float) -> list:
        """Send one request; serve capability calls until the worker answers.

        ``budget`` is wall time, capability calls included, as for the guest's
        own deadline; so a worker cannot keep this thread serving it forever.
        """
        conn = worker.conn
        try:
            conn.send_bytes(request)
        except OSError:
            raise _Lost("gone") from None
        deadline = time.monotonic() + budget
        while True:
            if not worker.wait(deadline - time.monotonic()):
                raise _Lost("hung")
            message = json.loads(conn.recv_bytes(MAX_MESSAGE))
            if message[0] != "cap":
                return message
            _, method, args = message
            conn.send_bytes(_serve_capability(caps, method, args))

    def _checkout(self) -> _Worker:
        with self._cond:
            while not self._idle and not self._closed:
                self._cond.wait()
            if self._closed:
                raise RuntimeError("sandbox pool is closed")
            worker = self._idle.pop()
            self._busy.add(worker)
            return worker

    def _checkin(self, worker: _Worker, recycle: str | None) -> None:
        worker.runs += 1
        if recycle is None and worker.runs >= self.max_runs_per_worker:
            recycle = "max_runs"
        with self._cond:
            self._busy.discard(worker)
            if self._closed:
                recycle = "closed"
            elif recycle is None:
                self._idle.append(worker)
                self._cond.notify()
                return
        self._in_background(self._replace, worker, recycle)

    # --- worker lifecycle -----------------------------------------------------

    def _start_all(self) -> None:
        starting: list[_Worker] = []
        try:
            if not _engine_cache_filled(self._cache_dir):
                # One worker compiles and fills the cache; the rest then load it.
                starting.append(self._start())
                self._add(self._await_ready(starting[0]))
            while len(starting) < self.size:
                starting.append(self._start())
            for worker in starting[len(self._idle):]:
                self._add(self._await_ready(worker))
        except BaseException:
            for worker in starting:
                _retire(worker, "start failed")
            raise

    def _start(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(target=_poolworker.main, args=(child, str(self._cache_dir)),
                                    name="almanac-sandbox-worker", daemon=True)
        process.start()
        child.close()  # so that our end sees EOF when the worker dies
        return _Worker(process, parent)

    def _await_ready(self, worker: _Worker) -> _Worker:
        try:
            if worker.wait(START_TIMEOUT_S) and json.loads(worker.conn.recv_bytes(64)) == ["ready"]:
                return worker
        except (EOFError, OSError, ValueError):
            pass
        _retire(worker, "start failed")
        raise RuntimeError(f"sandbox worker did not start (exit code {worker.exitcode})")

    def _add(self, worker: _Worker) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
        _retire(worker, "closed")

    def _replace(self, old: _Worker, why: str) -> None:
        _retire(old, why)
        delay = 0.1
        while not self._closed:
            try:
                self._add(self._await_ready(self._start()))
                return
            except Exception:
                log.exception("sandbox.worker_start_failed")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _in_background(self, target: Callable[..., None], *args: Any) -> None:
        def body() -> None:
            try:
                target(*args)
            finally:
                with self._cond:
                    self._background.discard(thread)

        thread = threading.Thread(target=body, name="almanac-sandbox-pool", daemon=True)
        with self._cond:
            self._background.add(thread)
        thread.start()


def _retire(worker: _Worker, why: str) -> None:
    """Close the pipe (a live worker exits on EOF); kill it if it lingers."""
    if worker.retired:
        return
    worker.retired = True
    worker.conn.close()
    worker.process.join(0.5)
    if worker.process.exitcode is None:
        worker.process.kill()
        worker.process.join()
    worker.exitcode = worker.process.exitcode
    fields = {"pid": worker.process.pid, "exitcode": worker.exitcode, "runs": worker.runs,
              "reason": why}
    if why in ("gone", "died", "hung", "malformed", "interrupted", "start failed"):
        log.warning("sandbox.worker_lost", extra=fields)
    else:
        log.info("sandbox.worker_retired", extra=fields)
    worker.process.close()


def _engine_cache_filled(cache_dir: Path) -> bool:
    return _engine.cached_image(cache_dir).exists()


def _serve_capability(caps: Capabilities | None, method: Any, args: Any) -> bytes:
    """Execute one of the worker's capability calls here, on the caller's ``caps``."""
    if caps is None or method not in CAP_METHODS or not isinstance(args, list):
        return dump(["x", "malformed request"])
    try:
        value = getattr(caps, method)(*args)
    except CapabilityError as exc:
        return dump(["e", str(exc) or "capability error"])
    except Exception:  # a platform bug: the script only learns that the call failed
        log.exception("sandbox.capability_failed", extra={"op": method})
        return dump(["x", "failed"])
    try:
        return dump(["v", value])
    except (TypeError, ValueError):
        log.error("sandbox.capability_not_json", extra={"op": method})
        return dump(["x", "not JSON"])


def _problem_from(value: Any) -> SyntaxProblem | None:
    if value is None:
        return None
    return SyntaxProblem(str(value["message"]), int(value["line"]), int(value["column"]))


def _ended(status: str, error: str, duration: int) -> RunResult:
    return RunResult(status, None, error, None, None, "", duration)
