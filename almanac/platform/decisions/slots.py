"""Run slots shared fairly between tenants: how much each may claim, and whose claim starts next.

Pure bookkeeping, no threads and no clock: the timer calls it while holding its
lock. Two numbers bound what one process takes on:

- `run_limit`: runs handed to the runner at once. The sandbox pool queues what
  it is handed (first come, first served), so every run handed over ahead of a
  tenant's run is a wait for that run. The limit follows Little's law: enough
  runs to keep every sandbox process busy plus what they finish within
  `target_wait_s`, so a run handed over now starts within about that time
  (trivial scripts: the runner's whole in-flight budget; 300 ms scripts on 2
  processes: 4).
- `capacity`: runs claimed and not yet ended (queued here or running). Claims
  wait only a few runs' time (`CLAIM_AHEAD` x the run limit), so their leases
  never have to cover a long wait (and the timer renews them anyway).

Fairness (SPEC section 11): each tenant with claimed work has its own queue;
a free slot goes to the next tenant in round-robin order that is under its
share of the run limit (`tenant_max_share`), so a quiet tenant's run starts
after at most one run of each busy tenant. A tenant past its share takes a slot
only when no other tenant waits for one. Slots it took so, while alone, are
not its to keep: a tenant under its share that comes later starts beyond the
run limit (`OVERFLOW` times it in all, at most) rather than wait for those
runs to end, which may be a script's whole timeout when they wait on `fetch`. A tenant may hold at most its share of
`capacity` in claims, so a tenant with thousands due never fills the claim
capacity and another tenant's due work is claimed as soon as it is due.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Generic, TypeVar

T = TypeVar("T")

OVERFLOW = 2  # runs out at once, at most, as a multiple of the run limit (see "Fairness" above)
CLAIM_AHEAD = 16  # claims held per run slot, at most (a tenant alone takes its share: half of them)
TARGET_WAIT_S = 0.25  # a run handed to the runner should start within about this long
EWMA_WEIGHT = 0.1  # weight of the latest run in the average run time


def share_of(total: int, share: float) -> int:
    """A tenant's part of `total` slots: at least one, never more than all."""
    return max(1, min(total, math.floor(total * share)))


def run_limit(parallel: int, workers: int, avg_run_s: float | None, target_wait_s: float = TARGET_WAIT_S) -> int:
    """Runs to hand to the runner at once: its processes busy, and a new run started within the target.

    `parallel` runs execute at the same time (sandbox processes, or threads);
    `workers` is the most the runner accepts; `avg_run_s` the runs' average time
    (None until one has ended: the runner's whole budget then).
    """
    parallel = max(1, min(parallel, workers))
    if not avg_run_s or avg_run_s <= 0:
        return workers
    wanted = math.ceil(parallel * (1 + target_wait_s / avg_run_s))
    return max(parallel, min(workers, wanted))


def claim_room(capacity: int, unfinished: int, tenant_unfinished: int, share: float) -> int:
    """How many runs a tenant may claim now: within the capacity and within its share of it."""
    return max(0, min(capacity - unfinished, share_of(capacity, share) - tenant_unfinished))


def wants_refill(capacity: int, unfinished: int, tenant_unfinished: int, share: float) -> bool:
    """Claim again only once the tenant's claims have drained to half its share (one transaction serves many)."""
    return tenant_unfinished <= share_of(capacity, share) // 2 and unfinished < capacity


class FairQueue(Generic[T]):
    """Claimed runs waiting for a slot, one queue per tenant, started round robin within each one's share."""

    def __init__(self, share: float) -> None:
        if not 0 < share <= 1:
            raise ValueError("a tenant's share of the run slots must be in (0, 1]")
        self.share = share
        self._queues: dict[str, deque[T]] = {}
        self._order: deque[str] = deque()  # tenants with queued runs, next first
        self.running: Counter[str] = Counter()

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def __bool__(self) -> bool:
        return bool(self._order)

    def queued(self, tenant: str) -> int:
        return len(self._queues.get(tenant, ()))

    def add(self, tenant: str, items: list[T], *, first: bool = False) -> None:
        """Queue `items` for `tenant`, after its queued ones; `first`: before them, and the tenant next in turn."""
        if not items:
            return
        queue = self._queues.get(tenant)
        if queue is None:
            queue = self._queues[tenant] = deque()
            self._order.append(tenant)
        if not first:
            queue.extend(items)
            return
        queue.extendleft(reversed(items))
        self._order.remove(tenant)
        self._order.appendleft(tenant)

    def pop(self, limit: int, *, lone: bool = True) -> tuple[str, T] | None:
        """The next run to start when fewer than `limit` run, or None.

        Round robin among tenants under their share of `limit`; a tenant at its
        share starts another only when it is the only one waiting (`lone`).
        With `lone` False (the slots are all taken) only a tenant under its share
        starts: the slots a tenant took while alone are not taken back from runs
        that wait in them, so the tenants that come later start beside them.
        """
        cap = share_of(limit, self.share)
        for _ in range(len(self._order)):
            tenant = self._order[0]
            self._order.rotate(-1)
            if self.running[tenant] < cap:
                return tenant, self._take(tenant)
        if lone and len(self._order) == 1:
            return self._order[0], self._take(self._order[0])
        return None

    def _take(self, tenant: str) -> T:
        queue = self._queues[tenant]
        item = queue.popleft()
        if not queue:
            del self._queues[tenant]
            self._order.remove(tenant)
        self.running[tenant] += 1
        return item

    def ended(self, tenant: str) -> None:
        self.running[tenant] -= 1
        if self.running[tenant] <= 0:
            del self.running[tenant]

    def remove(self, tenant: str, drop: set[int]) -> list[T]:
        """Take out the queued runs of `tenant` whose `run_id` is in `drop` (their lease was lost)."""
        queue = self._queues.get(tenant)
        if not queue:
            return []
        kept = deque(item for item in queue if getattr(item, "run_id", None) not in drop)
        gone = [item for item in queue if getattr(item, "run_id", None) in drop]
        if kept:
            self._queues[tenant] = kept
        else:
            del self._queues[tenant]
            self._order.remove(tenant)
        return gone
