"""The pool's parked workers and spares (see ``pool``'s docstring: "Waiting on the network").

A worker whose run waits on a capability that ``waits`` (``fetch``) is parked until the answer
is sent. Most answers come in milliseconds, and starting a process costs tens of them (seconds
on a loaded box), so a spare is started only for a worker parked longer than ``PARK_GRACE_S``
(the reactor's watch looks every 100 ms): the pool then grows to ``size`` plus the workers
parked that long, at most ``spares`` beyond ``size``. Workers are let go only once the pool has
had more unparked workers than ``size`` for ``LINGER_S`` (a burst of waits reuses them): the
extra ones are told, through their slot, to exit before taking another ticket.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ._poolprocs import Worker, await_ready, retire, serve_capability
from .capabilities import Capabilities

log = logging.getLogger("almanac.sandbox")

PARK_GRACE_S = 0.05  # parked longer than this: the worker's core goes to a spare
LINGER_S = 5.0  # by default, a spare stays this long after the waits that called for it are over


class SparesMixin:
    """Mixed into ``SandboxPool``, which provides the attributes declared here."""

    size: int
    spares: int
    spare_linger_s: float
    _lock: threading.Lock
    _closed: bool
    _parked: int
    _spawning: int
    _surplus_since: float | None
    _workers: dict[int, Worker]
    _arrivals: list[Worker]
    _waits: ThreadPoolExecutor
    _fill: Callable[[], None]
    _spawn: Callable[[], Worker]
    _wake: Callable[[], None]
    _in_background: Callable[..., None]

    def _live(self) -> int:
        """(Holding the lock.) Workers running or starting."""
        return len(self._workers) + len(self._arrivals) + self._spawning

    def _park(self, worker: Worker) -> None:
        with self._lock:
            if not worker.parked:
                worker.parked, worker.parked_at = True, time.monotonic()
                self._parked += 1
                self._fill()  # its run is out but takes no ticket: one more may be handed to the others

    def _unpark(self, worker: Worker) -> None:
        with self._lock:
            if worker.parked:
                worker.parked = False
                self._parked -= 1

    def _answer_waiting(self, worker: Worker, caps: Capabilities | None, method: str, args: Any) -> None:
        try:
            reply = serve_capability(caps, method, args)
        finally:
            self._unpark(worker)  # before the answer: the run may end at once, and count it as working
        try:
            worker.send(reply)
        except (OSError, ValueError):
            pass  # the worker is gone; the reactor sees its pipe close

    def _add_spares(self, now: float) -> None:
        """(The reactor's watch.) Start spares for workers parked longer than the grace."""
        with self._lock:
            if self._closed or not self._parked:
                return
            long_parked = sum(1 for w in self._workers.values() if w.parked and now - w.parked_at > PARK_GRACE_S)
            missing = min(self.size + long_parked, self.size + self.spares) - self._live()
            self._spawning += max(0, missing)
        for _ in range(missing):
            self._in_background(self._start_spare)

    def _let_go(self, now: float) -> None:
        """(The reactor's watch.) After ``spare_linger_s`` with more than ``size`` unparked workers, tell
        the extra ones (idle or not) to exit before their next ticket."""
        with self._lock:
            told = sum(1 for w in self._workers.values() if w.slot[2])
            extra = self._live() - self._parked - told - self.size
            if extra <= 0:
                self._surplus_since = None
                return
            if self._surplus_since is None:
                self._surplus_since = now
            if now - self._surplus_since < self.spare_linger_s:
                return
            for worker in self._workers.values():
                if extra <= 0:
                    break
                if not worker.parked and not worker.slot[2]:
                    worker.slot[2] = 1
                    extra -= 1
            self._surplus_since = None

    def _start_spare(self) -> None:
        try:
            worker = await_ready(self._spawn())
        except Exception:
            log.exception("sandbox.worker_start_failed")
            worker = None
        with self._lock:
            self._spawning -= 1
            if worker is not None and not self._closed:
                self._arrivals.append(worker)
                worker = None
        if worker is not None:
            retire(worker, "closed")
        self._wake()
