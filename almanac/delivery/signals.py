"""Which tenants have delivery work now (PostgreSQL): the signals their own writes left.

A trigger on each tenant's `events` and `deliveries` adds a row `(tenant, at)` to the shared
`delivery_signals` in the writer's transaction (migrations s0008 / t0015): a new event is due
for fan-out at once, a delivery at its `next_attempt_at` (its next try, or its lease end while
delivering, so that an attempt whose dispatcher died is looked at again). A dispatcher looks
only at the tenants of the rows that have fallen due. An idle tenant costs nothing, per pass or
ever, however many there are.

Writers only insert, so they never wait for a dispatcher, and a signal written while a
dispatcher looks is a row of its own, kept for its next pass. A dispatcher takes the rows
that have fallen due by moving them `HOLD_S` ahead (`FOR UPDATE SKIP LOCKED`: two dispatchers
take different rows), looks at their tenants, and deletes (`settle`) those of the tenants it
looked at. What it took and could not do (it died, or the tenant's look raised) falls due
again after the hold and is taken by whichever dispatcher passes then. So no dispatcher ever
needs to look at every tenant in case a signal was lost: before, each swept the tenants it
held once a minute, two transactions a tenant (some 2,000 a minute for 1,000 tenants).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text

from almanac.db import Database

TAKE_MAX = 1000  # signals taken per pass (oldest first); the rest wait for the next pass
# How long a taken signal waits for its taker to settle it before it falls due again. Longer than a
# pass (a batch of sends, each bounded by the delivery timeout); a taker that died costs its tenants
# at most this much delay, as the once-a-minute sweep it replaces did.
HOLD_S = 60.0

_TAKE = text("""
UPDATE delivery_signals SET at = :held_until WHERE id IN (
    SELECT id FROM delivery_signals WHERE at <= :now ORDER BY at LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id, tenant_slug
""")

_SETTLE = text("DELETE FROM delivery_signals WHERE id = ANY(:ids)")


def take(db: Database, now: datetime, *, hold_s: float = HOLD_S, limit: int = TAKE_MAX) -> dict[str, list[int]]:
    """The tenants of the signals due by `now`, each with the ids of its signals, now held `hold_s` ahead."""
    taken: dict[str, list[int]] = {}
    with db.engine.begin() as conn:
        held_until = now + timedelta(seconds=hold_s)
        for signal_id, slug in conn.execute(_TAKE, {"now": now, "held_until": held_until, "limit": limit}):
            taken.setdefault(slug, []).append(signal_id)
    return taken


def settle(db: Database, ids: list[int]) -> None:
    """Delete the signals of tenants that were looked at: their work was seen (or is signalled anew)."""
    if ids:
        with db.engine.begin() as conn:
            conn.execute(_SETTLE, {"ids": ids})
