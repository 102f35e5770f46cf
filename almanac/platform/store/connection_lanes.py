"""Lanes: each tenant's claims and records on one connection of the process (PostgreSQL).

A PostgreSQL backend builds a cache entry for every table and index it opens, the first time
it opens it, and plans its statements with them: meeting a tenant's tables cold cost a backend
~0.2-0.6 ms a table, where warm the same statement planned in ~0.04 ms (EXPLAIN). The
claim passes and the records of a burst over 1,000 tenants took whichever pooled connection
was free, so a tenant met several backends, each of them cold, and half of PostgreSQL's time
went to planning.

Here the process keeps `Settings.pg_lanes` connections (`Database.lanes`), and a tenant
belongs to one lane by a hash of its slug, computed by PostgreSQL (`LANE_OF`): the claim pass
ranks every lane's due rows at once, then each lane locks and claims its part on its own
connection (`due_index.claim`), and a run is recorded on the connection of the lane that claimed it. A lane's connection is used by one
thread at a time (its lock here), so it never needs a second backend.

Lanes change which connection does the work, never what is done: a lane's part is the same
transaction as without lanes (`FOR UPDATE SKIP LOCKED` on the shared due index, the same claim),
so the guarantees of one occurrence once and of failover stand as they were. Fairness between
lanes is `due_index.claim.claim_across`'s: one ranking across lanes, each lane its rows' part of it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text

# The lane of a due index row, for the pick: PostgreSQL's own hash of text (the one its hash
# partitions use, so stable across versions), computed per due row as the pick's tie order is.
LANE_OF = "abs(hashtextextended(tenant_slug, 0) % :lanes)"
_LANES_OF = text(f"SELECT tenant_slug, {LANE_OF} FROM unnest(CAST(:slugs AS varchar[])) AS t(tenant_slug)")


class Lanes:
    """The lanes of one process: their engines, one lock each, and each tenant's lane once known."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.engines: list[Any] = list(db.lanes)
        self._locks = [threading.Lock() for _ in self.engines]
        self._of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.engines)

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

    def note(self, tenant: str, lane: int) -> None:
        self._of[tenant] = lane

    def of(self, tenants: Iterable[str]) -> dict[str, int]:
        """Each tenant's lane: known from its claims, else asked of PostgreSQL once."""
        wanted = set(tenants)
        unknown = sorted(t for t in wanted if t not in self._of)
        if unknown:
            with self.db.engine.connect() as conn:
                found = conn.execute(_LANES_OF, {"slugs": unknown, "lanes": len(self.engines)}).all()
            self._of.update({slug: int(lane) for slug, lane in found})
        return {t: self._of[t] for t in wanted}
