"""History retention (SPEC section 9): runs, ended occurrences, events and their deliveries are kept
for a retention period per tenant, then pruned in small batches.

The period is `Settings.retention_days` (ALMANAC_RETENTION_DAYS, 30) unless the operator set one for
the tenant (`almanac tenant retention SLUG --days N`, stored beside the tenant's quota overrides).

What goes, oldest first, each step in batches of `batch` rows, each batch its own short transaction
(so nothing holds a lock for long, and the timer's claims, which only touch occurrences that are not
done, never wait on a prune):

1. events older than the cutoff that were fanned out and have no open delivery (pending,
   delivering, failed), with their fan-out marker, deliveries and delivery attempts; an event not yet
   fanned out, or still being delivered, stays (and with it the run the fan-out reads);
2. runs created before the cutoff, in a final status, with no event left;
3. occurrences that are done, were scheduled before the cutoff, and have no run left, except a job's
   occurrence at the job's own `run_at`.

So an unfinished run keeps its occurrence (not done) and itself (not final); an undelivered event
keeps itself, its deliveries and its run. Jobs (the keys) and schedules are not history and stay,
and so does the one occurrence that says a job already ran at its `run_at` (at most one a job):
SPEC section 8 promises that such a job is not run again unless `run_at` changes.
This module sits beside `worker.py` (it reads both the platform's and delivery's tables).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, select
from sqlalchemy.orm import Session

from almanac.db import Database
from almanac.delivery.models import OPEN, Delivery, DeliveryAttempt, EventFanout
from almanac.platform.store.models import DONE, Event, Job, Occurrence, Run
from almanac.platform.store.quotas import TenantQuota

log = logging.getLogger("almanac.retention")

EV, FO, D = Event.__table__, EventFanout.__table__, Delivery.__table__
R, O, J = Run.__table__, Occurrence.__table__, Job.__table__
FINAL = ("succeeded", "failed", "timed_out", "memory_exceeded", "skipped", "expired", "cancelled")
DAYS_MAX = 36_500


@dataclass
class Pruned:
    """Rows removed, by table."""

    events: int = 0
    deliveries: int = 0
    runs: int = 0
    occurrences: int = 0
    batches: int = 0
    done: bool = True  # False: stopped at `max_batches` with more to prune

    def add(self, other: "Pruned") -> None:
        for name in ("events", "deliveries", "runs", "occurrences", "batches"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.done = self.done and other.done


# -- the per-tenant period ----------------------------------------------------------------


def retention_days(shared: Session, slug: str, default: int) -> int:
    row = shared.get(TenantQuota, slug)
    return row.retention_days if row is not None and row.retention_days is not None else default


def set_retention_days(shared: Session, slug: str, days: int | None, now: datetime) -> None:
    """The operator's period for one tenant (None: back to the default)."""
    if days is not None and not 1 <= days <= DAYS_MAX:
        raise ValueError(f"retention must be 1 to {DAYS_MAX} days")
    row = shared.get(TenantQuota, slug)
    if row is None:
        row = TenantQuota(tenant_slug=slug, updated_at=now)
        shared.add(row)
    row.retention_days, row.updated_at = days, now
    shared.flush()


# -- pruning one tenant -------------------------------------------------------------------


def _old_events(s: Session, cutoff: datetime, batch: int) -> list[int]:
    return list(s.execute(
        select(EV.c.id).where(
            EV.c.created_at < cutoff,
            exists().where(FO.c.event_id == EV.c.id),  # fanned out (else its deliveries are still to come)
            ~exists().where(and_(D.c.event_id == EV.c.id, D.c.status.in_(OPEN))),
        ).order_by(EV.c.created_at).limit(batch)).scalars())


def _drop_events(s: Session, ids: list[int]) -> int:
    deliveries = select(Delivery.id).where(Delivery.event_id.in_(ids)).scalar_subquery()
    s.execute(delete(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_(deliveries)))
    gone = s.execute(delete(Delivery).where(Delivery.event_id.in_(ids)).returning(Delivery.id)).all()
    s.execute(delete(EventFanout).where(EventFanout.event_id.in_(ids)))
    s.execute(delete(Event).where(Event.id.in_(ids)))
    return len(gone)


def _old_runs(s: Session, cutoff: datetime, batch: int) -> list[int]:
    return list(s.execute(
        select(R.c.id).where(R.c.created_at < cutoff, R.c.status.in_(FINAL),
                             ~exists().where(EV.c.run_id == R.c.id))  # its events go first
        .order_by(R.c.created_at).limit(batch)).scalars())


def _old_occurrences(s: Session, cutoff: datetime, batch: int) -> list[int]:
    return list(s.execute(
        select(O.c.id).where(O.c.status == DONE, O.c.scheduled_for < cutoff,
                             ~exists().where(R.c.occurrence_id == O.c.id),  # its runs go first
                             # A job's occurrence at its run_at is its memory that it ran then: without
                             # it, a PUT of the same run_at would run the job again (SPEC section 8).
                             ~exists().where(J.c.id == O.c.job_id, J.c.run_at == O.c.scheduled_for))
        .order_by(O.c.scheduled_for).limit(batch)).scalars())


def prune_tenant(db: Database, slug: str, cutoff: datetime, *, batch: int = 500,
                 max_batches: int | None = None, pause: Callable[[], bool] | None = None,
                 rest: Callable[[], None] | None = None) -> Pruned:
    """Prune one tenant's history older than `cutoff`, `batch` rows per transaction.

    Stops after `max_batches` (then `done` is False) or when `pause()` answers True (the server is
    stopping); the next call goes on where this one stopped. `rest()` runs between two transactions
    (the server waits a little there, leaving the database and the CPU to claims).
    """
    total = Pruned()
    steps = (("events", _old_events, _drop_events), ("runs", _old_runs, _drop_ids(Run)),
             ("occurrences", _old_occurrences, _drop_ids(Occurrence)))
    for name, find, drop in steps:
        while True:
            if (max_batches is not None and total.batches >= max_batches) or (pause is not None and pause()):
                total.done = False
                return total
            with db.tenant_session(slug) as s:
                ids = find(s, cutoff, batch)
                if ids:
                    extra = drop(s, ids)
            if not ids:
                break
            total.batches += 1
            setattr(total, name, getattr(total, name) + len(ids))
            if name == "events":
                total.deliveries += extra
            if len(ids) < batch:
                break
            if rest is not None:
                rest()
    return total


def _drop_ids(model: Any) -> Callable[[Session, list[int]], int]:
    def drop(s: Session, ids: list[int]) -> int:
        s.execute(delete(model).where(model.id.in_(ids)))
        return 0

    return drop


def prune(db: Database, slugs: list[str], default_days: int, now: datetime, *, batch: int = 500,
          max_batches: int | None = None, pause: Callable[[], bool] | None = None,
          rest: Callable[[], None] | None = None) -> dict[str, Pruned]:
    """Prune every tenant of `slugs` with its own period; one tenant's failure does not stop the others."""
    with db.shared_session() as shared:
        days = {slug: retention_days(shared, slug, default_days) for slug in slugs}
    report: dict[str, Pruned] = {}
    for slug in slugs:
        try:
            report[slug] = prune_tenant(db, slug, now - timedelta(days=days[slug]), batch=batch,
                                        max_batches=max_batches, pause=pause, rest=rest)
        except Exception:
            log.exception("retention.failed", extra={"event": "retention.failed", "tenant": slug})
        if pause is not None and pause():
            break
    return report


# -- in the server ------------------------------------------------------------------------


@dataclass
class Pruner:
    """The periodic prune beside the timer and the dispatcher: every `interval_s`, the tenants this
    process looks after (`tenant_slugs`, the same share as its timer's), at most `max_batches` batches
    a tenant a pass so that one large tenant does not hold up the others (it goes on next pass)."""

    db: Database
    clock: Any
    tenant_slugs: Callable[[], list[str]]
    default_days: int
    interval_s: float
    batch: int = 500
    max_batches: int = 200
    rest_s: float = 0.02  # between two batches: claims get the database and the CPU (see bench/retention_bench.py)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def run_once(self) -> dict[str, Pruned]:
        report = prune(self.db, list(self.tenant_slugs()), self.default_days, self.clock.now(), batch=self.batch,
                       max_batches=self.max_batches, pause=self._stop.is_set,
                       rest=self._rest)
        removed = {slug: p for slug, p in report.items() if p.batches}
        if removed:
            log.info("retention.pruned", extra={"event": "retention.pruned", "tenants": len(removed),
                                                "runs": sum(p.runs for p in removed.values()),
                                                "events": sum(p.events for p in removed.values())})
        return report

    def _rest(self) -> None:
        self._stop.wait(self.rest_s)  # cut short by stop()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="almanac-retention", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):  # the first pass after one interval, not at start-up
            try:
                self.run_once()
            except Exception:
                log.exception("retention.pass_failed", extra={"event": "retention.pass_failed"})
