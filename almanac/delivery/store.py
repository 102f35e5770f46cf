"""Deliveries in the database: claim due ones with a lease, record an attempt, retry by hand,
and the read models of the API.

Claim: one transaction selects due deliveries (FOR UPDATE SKIP LOCKED on PostgreSQL) whose
target is enabled and which no earlier open delivery of the same target and ordering key holds
back, then takes each with a compare-and-set UPDATE on (status, lease_token) that sets a fresh
lease token. The send happens outside any transaction; its recording is fenced by the token,
so a dispatcher whose lease lapsed (and whose delivery someone else took over) records nothing.
The attempt counter goes up at claim time: a send that kills its process still counts.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.orm import Session, aliased

from almanac.delivery import policy
from almanac.delivery.models import (
    DEAD, DELIVERING, FAILED, OPEN, PENDING, SUCCEEDED, Delivery, DeliveryAttempt, EventFanout, Target,
)
from almanac.delivery.attempt import Job, Result
from almanac.errors import Conflict, NotFound
from almanac.platform.store.models import Event

D, A, T, FO, EV = Delivery.__table__, DeliveryAttempt.__table__, Target.__table__, EventFanout.__table__, Event.__table__
ERROR_MAX = 500


@dataclass(frozen=True)
class Claimed:
    job: Job
    lease_token: str
    attempts: int


def payload(tenant: str, event: Any, fanout: Any) -> dict[str, Any]:
    """The event as receivers see it (the guide, docs/guide/delivery.md: "Payload")."""
    return {
        "id": fanout.public_id, "topic": event.topic,
        "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
        "tenant": tenant, "data": json.loads(event.data), "run_id": event.run_id,
        "schedule_id": fanout.schedule_id, "job_key": fanout.job_key,
    }


def _due(session: Session, now: datetime, limit: int) -> list[Any]:
    earlier = aliased(Delivery)
    held_back = exists().where(and_(
        earlier.target_id == D.c.target_id, earlier.order_key == D.c.order_key,
        earlier.event_id < D.c.event_id, earlier.status.in_(OPEN)))
    query = (select(D).join(T, T.c.id == D.c.target_id)
             .where(D.c.next_attempt_at <= now, D.c.status.in_(OPEN), T.c.enabled.is_(True), ~held_back)
             .order_by(D.c.next_attempt_at, D.c.id).limit(limit))
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(of=D, skip_locked=True)
    return list(session.execute(query).all())


def claim_due(session: Session, tenant: str, now: datetime, cfg: policy.DeliveryConfig) -> list[Claimed]:
    claimed = []
    for row in _due(session, now, cfg.batch):
        if row.status == DELIVERING and row.attempts >= cfg.max_attempts:
            _bury_lapsed(session, row, now)
            continue
        token, lease = uuid.uuid4().hex, now + timedelta(seconds=cfg.lease_s)
        cas = (D.c.id == row.id) & (D.c.status == row.status) & (
            D.c.lease_token.is_(None) if row.lease_token is None else D.c.lease_token == row.lease_token)
        taken = session.execute(update(D).where(cas).values(
            status=DELIVERING, lease_token=token, lease_until=lease, next_attempt_at=lease,
            attempts=row.attempts + 1, updated_at=now)).rowcount
        if taken == 1:
            claimed.append(Claimed(_job(session, tenant, row, row.attempts + 1), token, row.attempts + 1))
    return claimed


def _bury_lapsed(session: Session, row: Any, now: datetime) -> None:
    """A last attempt whose sender vanished: no attempt is left, so the delivery is dead."""
    error = "the last attempt's dispatcher stopped before recording an outcome"
    session.execute(update(D).where(D.c.id == row.id, D.c.lease_token == row.lease_token).values(
        status=DEAD, lease_token=None, lease_until=None, next_attempt_at=None, last_error=error, updated_at=now))


def _job(session: Session, tenant: str, row: Any, attempt: int) -> Job:
    target = session.execute(select(T).where(T.c.id == row.target_id)).one()
    event = session.execute(select(EV).where(EV.c.id == row.event_id)).one()
    fanout = session.execute(select(FO).where(FO.c.event_id == row.event_id)).one()
    return Job(delivery_id=row.id, attempt=attempt, kind=target.kind, payload=payload(tenant, event, fanout),
               url=target.url, secret=target.secret, recipients=tuple(json.loads(target.recipients or "[]")),
               subject_template=target.subject_template, body_template=target.body_template)


def record(session: Session, claimed: Claimed, result: Result, now: datetime, cfg: policy.DeliveryConfig,
           rng: random.Random) -> str | None:
    """Store the attempt and the delivery's next state; None when the lease was lost (fenced)."""
    if result.ok:
        status, next_at = SUCCEEDED, None
    else:
        wait = policy.parse_retry_after(result.retry_after, now)
        next_at = policy.next_attempt(claimed.attempts, now, cfg, rng, wait)
        status = FAILED if next_at is not None else DEAD
    fence = (D.c.id == claimed.job.delivery_id) & (D.c.lease_token == claimed.lease_token) & (D.c.status == DELIVERING)
    error = result.error[:ERROR_MAX] if result.error else None
    if session.execute(update(D).where(fence).values(
            status=status, next_attempt_at=next_at, lease_token=None, lease_until=None, updated_at=now,
            last_status_code=result.status_code, last_error=error, last_latency_ms=result.latency_ms)).rowcount != 1:
        return None
    session.execute(A.insert().values(
        delivery_id=claimed.job.delivery_id, number=claimed.attempts, at=now,
        outcome=SUCCEEDED if result.ok else FAILED, status_code=result.status_code,
        latency_ms=result.latency_ms, error=error))
    return status


def retry(session: Session, delivery_id: int, now: datetime) -> Delivery:
    """Send a dead, failed or succeeded delivery again now, with a fresh round of attempts."""
    row = get(session, delivery_id)
    if row.status in (PENDING, DELIVERING):
        raise Conflict(f"Delivery {delivery_id} is already {row.status}.")
    row.status, row.attempts, row.next_attempt_at, row.updated_at = PENDING, 0, now, now
    session.flush()
    return row


def get(session: Session, delivery_id: int) -> Delivery:
    row = session.get(Delivery, delivery_id)
    if row is None:
        raise NotFound(f"There is no delivery {delivery_id}.")
    return row


def listing(session: Session, *, event_id: int | None = None, target_id: int | None = None,
            status: str | None = None, before_id: int | None = None, limit: int = 50) -> list[Delivery]:
    query = select(Delivery).order_by(Delivery.id.desc()).limit(limit)
    for column, value in ((Delivery.event_id, event_id), (Delivery.target_id, target_id), (Delivery.status, status)):
        if value is not None:
            query = query.where(column == value)
    if before_id is not None:
        query = query.where(Delivery.id < before_id)
    return list(session.scalars(query))


def attempts_of(session: Session, delivery_id: int) -> list[DeliveryAttempt]:
    return list(session.scalars(select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == delivery_id)
                                .order_by(DeliveryAttempt.id)))


def get_event(session: Session, event_id: int) -> Event:
    row = session.get(Event, event_id)
    if row is None:
        raise NotFound(f"There is no event {event_id}.")
    return row


def public_ids(session: Session, event_ids: list[int]) -> dict[int, str]:
    rows = session.execute(select(FO.c.event_id, FO.c.public_id).where(FO.c.event_id.in_(event_ids))).all()
    return {r.event_id: r.public_id for r in rows}


def event_id_of(session: Session, public_id: str) -> int | None:
    """The event behind a public id (`evt_…`), as receivers quote it; None if unknown."""
    return session.execute(select(FO.c.event_id).where(FO.c.public_id == public_id)).scalar()


def topics_of(session: Session, event_ids: list[int]) -> dict[int, str]:
    return dict(session.execute(select(EV.c.id, EV.c.topic).where(EV.c.id.in_(event_ids))).all())


@dataclass(frozen=True)
class Page:
    """One page of deliveries, newest first, with the public ids of their events and the cursor
    (the last id) of the next page, or None when this page is the last."""

    rows: list[Delivery]
    public_ids: dict[int, str]
    next_cursor: int | None


def page(session: Session, *, limit: int = 50, **filters: Any) -> Page:
    """`listing` with what every reader of it (API and pages) shows beside the rows."""
    rows = listing(session, limit=limit, **filters)
    cursor = rows[-1].id if len(rows) == limit else None
    return Page(rows, public_ids(session, [r.event_id for r in rows]), cursor)


def counts_by_target(session: Session) -> dict[int, dict[str, int]]:
    """{target id: {status: deliveries}}, for an overview of every target at once."""
    out: dict[int, dict[str, int]] = {}
    rows = session.execute(select(D.c.target_id, D.c.status, func.count()).group_by(D.c.target_id, D.c.status))
    for target_id, status, count in rows:
        out.setdefault(target_id, {})[status] = count
    return out
