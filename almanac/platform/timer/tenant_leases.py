"""Spreading tenants over processes, with leases in the shared schema and no coordinator.

Since the cross-tenant due index every PostgreSQL process claims any tenant's due work
(`timer.claim_paths.AcrossTenants`), in one order whatever leases it holds: a tenant's place in a burst does not
depend on its holder. These leases spread the tenants' deliveries (webhooks, e-mail) and
pruning over the processes; on SQLite they are not used at all.

Every few seconds (`renew_s`) each process, in one transaction on the database's clock:

1. refreshes its heartbeat (`worker_heartbeats`, valid for `ttl_s`) and counts the
   live processes;
2. adds a lease row for every tenant that has none (and drops rows of tenants that
   are gone);
3. renews the leases it holds; gives back (owner NULL) those above its share:
   `tenants // live` processes, plus one for the first `tenants % live` processes
   by owner id (so the shares add up to exactly the number of tenants);
4. takes free or lapsed leases up to its share, `FOR UPDATE SKIP LOCKED` so that
   two processes never take the same row, each with a new token.

A process that starts takes its share from the next cycles of the others (they
see its heartbeat and give back their excess); a process that dies stops
renewing, and once its heartbeat and leases lapse (`ttl_s`) the others' shares
grow and they take its tenants. A process paused past `ttl_s` finds on resuming
that its renewals no longer match and drops those tenants.

Why leases in a table rather than `pg_try_advisory_lock` per tenant: advisory locks
would follow the session (a dead process releases at once, but so does every
network blip and every PgBouncer in transaction mode), are invisible to an
operator, and still need a count of processes to share fairly. A row per tenant
shows who runs what (`SELECT * FROM timer_leases`) and survives reconnects.

These leases decide only who *looks* at a tenant. Two processes briefly ticking
the same tenant (a hand-over, a paused process) is harmless: every occurrence is
still claimed `FOR UPDATE SKIP LOCKED` with a compare-and-set, and its finish is
fenced by its own lease token.

On SQLite there is one machine: every process owns every tenant (`owned()` lists them all).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from almanac.db import Database
from almanac.platform.store.coordination_models import TimerLease, WorkerHeartbeat

log = logging.getLogger("almanac.leases")

L, H = TimerLease.__table__, WorkerHeartbeat.__table__
DEFAULT_TTL_S = 10.0




def new_owner() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TenantLeases:
    """The tenants this process runs the timer for; `owned` is the scheduler's tenant list."""

    def __init__(
        self, db: Database, list_tenants: Callable[[], Iterable[str]], *, ttl_s: float | None = None,
        renew_s: float | None = None, owner: str | None = None, on_gained: Callable[[str], None] | None = None,
    ) -> None:
        self.db, self.list_tenants = db, list_tenants
        self.ttl_s = DEFAULT_TTL_S if ttl_s is None else ttl_s
        self.renew_s = renew_s if renew_s is not None else max(0.2, self.ttl_s / 3)
        self.owner = owner or new_owner()
        self.on_gained = on_gained
        self._owned: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the scheduler asks ------------------------------------------------------

    def owned(self) -> list[str]:
        if self.db.is_sqlite:
            return list(self.list_tenants())
        with self._lock:
            return sorted(self._owned)

    def owns(self, slug: str) -> bool:
        if self.db.is_sqlite:
            return True
        with self._lock:
            return slug in self._owned

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Take a first share now (so the scheduler starts with it), then renew in a thread."""
        if self.db.is_sqlite or self._thread is not None:
            return
        self._cycle_safely()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="almanac-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and hand every lease back at once (a clean exit need not wait for a lapse)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.db.is_sqlite:
            return
        try:
            with Session(self.db.engine) as s, s.begin():
                s.execute(update(L).where(L.c.owner == self.owner).values(owner=None, token=None, expires_at=None))
                s.execute(delete(H).where(H.c.owner == self.owner))
        except Exception:
            log.warning("leases.release_failed", extra={"event": "leases.release_failed"}, exc_info=True)
        with self._lock:
            self._owned = frozenset()

    def _run(self) -> None:
        while not self._stop.wait(self.renew_s):
            self._cycle_safely()

    def _cycle_safely(self) -> None:
        try:
            self.cycle()
        except Exception as exc:  # the database is away: keep what we had; the leases say the rest
            log.warning("leases.cycle_failed", extra={"event": "leases.cycle_failed", "error": type(exc).__name__})

    # -- one cycle --------------------------------------------------------------------

    def cycle(self) -> frozenset[str]:
        """Heartbeat, renew, give back the excess, take up to the share; returns the tenants now owned."""
        tenants = set(self.list_tenants())
        ttl = timedelta(seconds=self.ttl_s)
        with Session(self.db.engine) as s, s.begin():
            now = s.execute(select(func.now())).scalar_one()
            live, rank = self._heartbeat(s, now, ttl)
            self._sync_rows(s, tenants)
            share = len(tenants) // live + (1 if rank < len(tenants) % live else 0)
            held = set(s.execute(update(L).where(L.c.owner == self.owner).values(expires_at=now + ttl)
                                 .returning(L.c.tenant_slug)).scalars())
            if len(held) > share:
                excess = sorted(held)[share:]
                s.execute(update(L).where(L.c.tenant_slug.in_(excess), L.c.owner == self.owner)
                          .values(owner=None, token=None, expires_at=None))
                held -= set(excess)
            elif len(held) < share:
                held |= self._take(s, now, ttl, share - len(held))
        return self._settle(frozenset(held), live, share)

    def _heartbeat(self, s: Session, now: object, ttl: timedelta) -> tuple[int, int]:
        """Refresh ours; return how many processes are live and our rank among them (by owner id)."""
        from sqlalchemy.dialects.postgresql import insert

        stmt = insert(H).values(owner=self.owner, started_at=now, seen_at=now, expires_at=now + ttl)
        s.execute(stmt.on_conflict_do_update(index_elements=[H.c.owner],
                                             set_=dict(seen_at=now, expires_at=now + ttl)))
        s.execute(delete(H).where(H.c.expires_at < now - 10 * ttl))  # long gone: keep the table small
        owners = list(s.execute(select(H.c.owner).where(H.c.expires_at > now).order_by(H.c.owner)).scalars())
        return len(owners), owners.index(self.owner)

    def _sync_rows(self, s: Session, tenants: set[str]) -> None:
        from sqlalchemy.dialects.postgresql import insert

        known = set(s.execute(select(L.c.tenant_slug)).scalars())
        if tenants - known:
            s.execute(insert(L).on_conflict_do_nothing(), [{"tenant_slug": t} for t in sorted(tenants - known)])
        if known - tenants:
            s.execute(delete(L).where(L.c.tenant_slug.in_(sorted(known - tenants))))

    def _take(self, s: Session, now: object, ttl: timedelta, count: int) -> set[str]:
        free = (
            select(L.c.tenant_slug)
            .where(L.c.owner.is_(None) | (L.c.expires_at < now))
            .order_by(L.c.expires_at.nulls_first(), L.c.tenant_slug)
            .limit(count).with_for_update(skip_locked=True)
        )
        slugs = list(s.execute(free).scalars())
        if slugs:  # a fresh token per row, made by the database: one statement for any number of rows
            token = func.md5(func.concat(func.gen_random_uuid(), L.c.tenant_slug))
            s.execute(update(L).where(L.c.tenant_slug.in_(slugs)).values(
                owner=self.owner, token=token, expires_at=now + ttl))
        return set(slugs)

    def _settle(self, held: frozenset[str], live: int, share: int) -> frozenset[str]:
        with self._lock:
            gained, lost = held - self._owned, self._owned - held
            self._owned = held
        if gained or lost:
            log.info("leases.changed", extra={"event": "leases.changed", "owner": self.owner, "owned": len(held),
                                              "gained": len(gained), "lost": len(lost), "live": live, "share": share})
        if self.on_gained is not None:
            for slug in sorted(gained):
                try:
                    self.on_gained(slug)
                except Exception:
                    log.exception("leases.on_gained_failed", extra={"event": "leases.on_gained_failed"})
        return held
