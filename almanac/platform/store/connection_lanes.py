"""Lanes: each tenant's claims and records on one connection of the process (PostgreSQL).

A PostgreSQL backend builds a cache entry for every table and index it opens, the first time
it opens it, and plans its statements with them: meeting a tenant's tables cold cost a backend
~0.2-0.6 ms a table, where warm the same statement planned in ~0.04 ms (EXPLAIN). The
claim passes and the records of a burst over 1,000 tenants took whichever pooled connection
was free, so a tenant met several backends, each of them cold, and half of PostgreSQL's time
went to planning.

Here the process keeps `Settings.pg_lanes` connections (`Database.lanes`), and a tenant
belongs to one lane by a hash of its slug, computed by PostgreSQL (`LANE_OF`): the claim pass
picks from one lane's tenants at a time (`due_index.claim`), on that lane's connection, and a run is
recorded on the connection of the lane that claimed it. A lane's connection is used by one
thread at a time (its lock here), so it never needs a second backend.

Lanes change which connection does the work, never what is done: a lane's part is the same
transaction as without lanes (`FOR UPDATE SKIP LOCKED` on the shared due index, the same claim),
so the guarantees of one occurrence once and of failover stand as they were. Fairness between
lanes is `rotation`'s: a pass starts at the lane from which this process has claimed the fewest
rows per tenant it has due (counted once every `WEIGH_EVERY_S`), so a lane of few tenants is not
served as often as a lane of many, whatever the passes' sizes; and every lane starts a pass at
least once every `2 * lanes` passes, so new work in a lane counted empty waits a few passes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import text

# The lane of a due index row, for the pick: PostgreSQL's own hash of text (the one its hash
# partitions use, so stable across versions), computed per due row as the pick's tie order is.
LANE_OF = "abs(hashtextextended(tenant_slug, 0) % :lanes)"
_LANES_OF = text(f"SELECT tenant_slug, {LANE_OF} FROM unnest(CAST(:slugs AS varchar[])) AS t(tenant_slug)")
# The tenants each lane has due: the lanes' weights. A scan of the due rows (~5 ms with 20,000 due),
# so once a second, not once a pass.
_DUE_TENANTS = text(f"SELECT {LANE_OF}, count(DISTINCT tenant_slug) FROM due_index WHERE due_at <= :now GROUP BY 1")
WEIGH_EVERY_S = 1.0


class Lanes:
    """The lanes of one process: their engines, one lock each, and each tenant's lane once known."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.engines: list[Any] = list(db.lanes)
        self._locks = [threading.Lock() for _ in self.engines]
        self._of: dict[str, int] = {}
        count = len(self.engines)
        self._weight = [1] * count  # tenants with rows due in each lane, at the last count
        self._weighed_at: float | None = None  # when they were counted (monotonic)
        self._served = [0.0] * count  # rows this process claimed from each lane, per tenant it had due
        self._idle = [0] * count  # passes since the lane last started one
        self._starting: set[int] = set()  # lanes a pass of this process started at and still runs
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self.engines)

    def rotation(self, now: datetime) -> list[int]:
        """Every lane once, for a pass at `now`: the lanes with due work by the rows this process has
        claimed from them per tenant they have due, least first; a lane counted empty comes first once
        every `2 * lanes` passes (new work there), else last. The first is this pass's own until
        `done(first)`: another claimer of this process starts at another lane, rather than skip this
        one, and the pass waits for it (a record on its connection) rather than go elsewhere; skipped,
        the lanes whose tenants had the most runs to record were claimed the least."""
        self._weigh(now)
        with self._guard:
            count = len(self.engines)
            for lane in range(count):
                self._idle[lane] += 1
            order = sorted(range(count), key=lambda lane: (self._weight[lane] == 0, self._served[lane]))
            overdue = [lane for lane in order if self._idle[lane] > 2 * count]
            free = [lane for lane in order if lane not in self._starting]
            first = overdue[0] if overdue and overdue[0] not in self._starting else (free or order)[0]
            order.remove(first)
            self._idle[first] = 0
            self._starting.add(first)
        return [first, *order]

    def done(self, first: int) -> None:
        """The pass that started at `first` (`rotation`) is over."""
        with self._guard:
            self._starting.discard(first)

    def claimed(self, lane: int, rows: int) -> None:
        """A pass claimed (locked) `rows` of this lane's due rows."""
        with self._guard:
            self._served[lane] += rows / max(1, self._weight[lane])

    def _weigh(self, now: datetime) -> None:
        """Count the tenants each lane has due, at most once every `WEIGH_EVERY_S`."""
        at = time.monotonic()
        with self._guard:
            if self._weighed_at is not None and at - self._weighed_at < WEIGH_EVERY_S:
                return
            self._weighed_at = at
        with self.db.engine.connect() as conn:
            found = dict(conn.execute(_DUE_TENANTS, {"now": now, "lanes": len(self.engines)}).all())
        with self._guard:
            weight = [int(found.get(lane, 0)) for lane in range(len(self.engines))]
            busy = [self._served[lane] for lane in range(len(weight)) if self._weight[lane]]
            for lane, tenants in enumerate(weight):  # a lane whose work is new starts level, not owed
                if tenants and not self._weight[lane] and busy:
                    self._served[lane] = max(self._served[lane], min(busy))
            self._weight = weight

    @contextmanager
    def held(self, lane: int, *, wait: bool) -> Iterator[bool]:
        """The lane's connection to this thread alone; without `wait`, False if another thread has it."""
        lock = self._locks[lane]
        if not lock.acquire(blocking=wait):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def of(self, tenants: Iterable[str]) -> dict[str, int]:
        """Each tenant's lane, asked of PostgreSQL once."""
        wanted = set(tenants)
        unknown = sorted(t for t in wanted if t not in self._of)
        if unknown:
            with self.db.engine.connect() as conn:
                found = conn.execute(_LANES_OF, {"slugs": unknown, "lanes": len(self.engines)}).all()
            self._of.update({slug: int(lane) for slug, lane in found})
        return {t: self._of[t] for t in wanted}
