"""Which tenants have delivery work now (PostgreSQL): the signals their own writes left.

A trigger on each tenant's `events` and `deliveries` adds a row `(tenant, at)` to the shared
`delivery_signals` in the writer's transaction (migrations s0008 / t0015): a new event is due
for fan-out at once, a delivery at its `next_attempt_at` (its next try, or its lease end while
delivering, so that an attempt whose dispatcher died is looked at again). A dispatcher takes
the rows that have fallen due, deleting them in the same statement (`FOR UPDATE SKIP LOCKED`:
two dispatchers take different rows), and looks only at those tenants. An idle tenant costs
nothing per pass, however many there are.

Nothing here is ever updated, only inserted and deleted, so writers never wait for a
dispatcher and a signal written while a dispatcher looks is kept for its next pass. What a
dispatcher took and then could not do (it died) is found by the slow sweep of the tenants it
holds (`Dispatcher`), as the deliveries' leases themselves would be.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from almanac.db import Database

TAKE_MAX = 1000  # signals taken per pass (oldest first); the rest wait for the next pass

_TAKE = text("""
DELETE FROM delivery_signals WHERE id IN (
    SELECT id FROM delivery_signals WHERE at <= :now ORDER BY at LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING tenant_slug
""")


def take(db: Database, now: datetime, limit: int = TAKE_MAX) -> set[str]:
    """The tenants of the signals due by `now`, those signals deleted: this dispatcher looks at them now."""
    with db.engine.begin() as conn:
        return set(conn.execute(_TAKE, {"now": now, "limit": limit}).scalars())
