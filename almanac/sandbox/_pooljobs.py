"""A ``SandboxPool``'s jobs: what it queues for its workers, and what the caller gets back
when the sandbox (not the script) ends one, or when a worker answers a syntax check.

A job is a run (a ``contract.RunRequest`` and the caller's ``Capabilities``, which answer
its remote calls) or a syntax check; ``done`` is called once with its ``RunResult`` or
``SyntaxProblem`` (None: the script parses). Its ``owner`` (the platform's tenant; opaque
here) is whom the pool's slots are shared between (``FairWaiting``).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any, Callable, Hashable

from .capabilities import Capabilities
from .contract import RunRequest, ended
from .runtime import SyntaxProblem


class Job:
    __slots__ = ("id", "kind", "request", "caps", "done", "state", "owner")

    def __init__(self, job_id: int, kind: str, request: RunRequest, caps: Capabilities | None,
                 done: Callable[[Any], None], owner: Hashable = None) -> None:
        self.id, self.kind, self.request = job_id, kind, request
        self.caps, self.done, self.owner = caps, done, owner
        self.state = "waiting"  # -> "ticketed" (in the socket or running: its worker's slot says which)

    def ended(self, status: str, error: str, duration_ms: int = 0) -> Any:
        """What the caller gets when the sandbox, not the script, ended the job."""
        if self.kind == "check":
            return SyntaxProblem("the sandbox could not check this script", 1, 1)
        return ended(status, error, duration_ms)


def problem_from(value: Any) -> SyntaxProblem | None:
    """A worker's ``checked`` payload as a ``SyntaxProblem`` (None: it parses)."""
    if value is None:
        return None
    return SyntaxProblem(str(value["message"]), int(value["line"]), int(value["column"]))


def owner_cap(slots: int, share: float) -> int:
    """Jobs one owner may have out at once: its share of the pool's processes (workers and spares).

    Every job out may park its worker on the network, so an owner at its cap holds at most that
    share of the processes the pool can have, and the others' jobs find the rest."""
    return max(1, min(slots, math.floor(slots * share)))


class FairWaiting:
    """Jobs not yet ticketed, one queue per owner, ticketed round robin; an owner with ``cap`` jobs out
    (ticketed and not ended: in the socket, running, or parked) waits until one of them ends. Jobs
    without an owner are served in turn like an owner's, and never wait for a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._queues: dict[Hashable, deque[Job]] = {}
        self._order: deque[Hashable] = deque()  # owners with waiting jobs, next first
        self.out: Counter[Hashable] = Counter()

    def __bool__(self) -> bool:
        return bool(self._order)

    def append(self, job: Job) -> None:
        queue = self._queues.get(job.owner)
        if queue is None:
            queue = self._queues[job.owner] = deque()
            self._order.append(job.owner)
        queue.append(job)

    def next(self) -> Job | None:
        """The next job to ticket (the owner after the last one served, under its cap), or None."""
        for _ in range(len(self._order)):
            owner = self._order[0]
            self._order.rotate(-1)
            if owner is None or self.out[owner] < self.cap:  # a job with no owner (a syntax check) shares nothing
                return self._queues[owner][0]
        return None

    def ticketed(self, job: Job) -> None:
        """``job`` (the last ``next``) went into the socket."""
        queue = self._queues[job.owner]
        queue.popleft()
        if not queue:
            del self._queues[job.owner]
            self._order.remove(job.owner)
        self.out[job.owner] += 1

    def ended(self, job: Job) -> None:
        """A ticketed job ended."""
        self.out[job.owner] -= 1
        if self.out[job.owner] <= 0:
            del self.out[job.owner]

    def drain(self) -> list[Job]:
        """Every waiting job, taken out (the pool is closing)."""
        jobs = [job for queue in self._queues.values() for job in queue]
        self._queues.clear()
        self._order.clear()
        return jobs
