"""The pool's parked workers and spares (see ``pool``'s docstring: "Waiting on the network").

A worker whose run waits on a capability that ``waits`` (``fetch``) is parked until the answer
is sent; while fewer than ``size`` workers are unparked, a spare is started (at most ``spares``
beyond ``size``). The pool's reactor tells a surplus worker to leave once its run is done.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ._poolprocs import Worker, await_ready, retire, serve_capability
from .capabilities import Capabilities

log = logging.getLogger("almanac.sandbox")


class SparesMixin:
    """Mixed into ``SandboxPool``, which provides the attributes declared here."""

    size: int
    spares: int
    _lock: threading.Lock
    _closed: bool
    _parked: int
    _spawning: int
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
            if worker.parked:
                return
            worker.parked = True
            self._parked += 1
            start = not self._closed and self._live() - self._parked < self.size \
                and self._live() < self.size + self.spares
            if start:
                self._spawning += 1
            self._fill()  # its tickets may wait: more may be handed to the others
        if start:
            self._in_background(self._start_spare)

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
            worker.conn.send_bytes(reply)
        except (OSError, ValueError):
            pass  # the worker is gone; the reactor sees its pipe close

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
