"""The pool's watch over its workers' deadlines (see ``pool``'s docstring: "Failure").

Every ``WATCH_MS`` while runs are out, the reactor looks at each worker's slot. A worker whose run
is past its timeout plus ``GRACE_S`` is killed and the run ends ``timed_out``. Two things keep a
stall of the parent (a GC pause, a starved CPU, SIGSTOP) from killing healthy runs:

* The deadline counts from when the worker had its script: a worker stamps its start, then asks
  the parent for a source it has not seen. Time spent waiting for that answer is not the run's.
* What a worker has written is read before its deadline is judged: a reactor that stalled after
  a poll that missed the worker's message would otherwise judge it on the stamp alone.
"""

from __future__ import annotations

import select
import threading
import time
from socket import socket
from typing import Any, Callable

from ._pooljobs import Job
from ._poolprocs import Worker

GRACE_S = 2.0  # past a run's own deadline before the parent kills its worker
LOST_TICKET_S = 2.0  # after a worker died idle: how long its taken-but-unstarted tickets are given
WATCH_MS = 100  # how often the reactor looks at the workers' slots while runs are out


class WatchMixin:
    """Mixed into ``SandboxPool``, which provides the attributes declared here."""

    _lock: threading.Lock
    _jobs: dict[int, Job]
    _workers: dict[int, Worker]
    _tickets_in: socket
    _lost_idle_at: float | None
    _add_spares: Callable[[float], None]
    _let_go: Callable[[float], None]
    _read: Callable[[Worker], None]
    _lose: Callable[[Worker, str], None]
    _finish: Callable[[Job, Any], None]

    def _watch(self, now: float) -> None:
        """Kill workers past their run's deadline; fail tickets a dead worker took and never started;
        start spares for workers parked on the network, and let them go when no longer needed."""
        self._add_spares(now)
        self._let_go(now)
        for worker in list(self._workers.values()):
            if self._overdue(worker, now):
                worker.process.kill()
                self._lose(worker, "hung")
        if self._lost_idle_at is not None and now - self._lost_idle_at > LOST_TICKET_S:
            self._fail_lost_tickets()

    def _overdue(self, worker: Worker, now: float) -> bool:
        """The worker's run is past its deadline, once what the worker has written has been read."""
        if not self._past_deadline(worker, now):
            return False
        if not worker.poller.poll(0):
            return True
        self._read(worker)  # its result, or its request for the source, may be waiting
        return worker.fd in self._workers and self._past_deadline(worker, time.monotonic())

    def _past_deadline(self, worker: Worker, now: float) -> bool:
        job_id, started = worker.running()
        if not job_id:
            return False
        handed_job, handed_at = worker.handed
        begun = max(started, handed_at) if handed_job == job_id else started
        return now > begun + _job_timeout(self._jobs.get(job_id))

    def _fail_lost_tickets(self) -> None:
        """A worker died between taking a ticket and saying so: that ticket's job never ends by itself.

        Once the socket is empty and every live worker has had ``LOST_TICKET_S`` to say
        which job it took, ticketed jobs that no worker started are lost: they end
        ``failed`` (never run again: a stalled worker might still run them).
        """
        if select.select([self._tickets_in], [], [], 0)[0]:
            return  # tickets still wait: look again later
        running = {worker.running()[0] for worker in self._workers.values()}
        with self._lock:
            lost = [job for job in self._jobs.values() if job.state == "ticketed" and job.id not in running]
            self._lost_idle_at = None
        for job in lost:
            self._finish(job, job.ended("failed", "sandbox worker died"))


def _job_timeout(job: Job | None) -> float:
    return (job.request.limits.timeout_ms / 1000 if job is not None else 0.0) + GRACE_S
