"""Fan-out: each new event becomes one delivery per matching enabled target, in one transaction.

An event counts as new while it has no `event_fanouts` row. The marker is inserted with
ON CONFLICT DO NOTHING first, so when two dispatchers fan out the same event only the one that
inserted it goes on to add deliveries (themselves unique per event and target). Targets
created later do not receive older events.

Ordering key: events of one schedule reach one target in order (`schedule:<id>`); likewise a
job's (`job:<key>`); a manual run's events are ordered among themselves (`run:<id>`).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from almanac.db import insert_ignore
from almanac.delivery import targets as targets_mod
from almanac.delivery.models import PENDING, Delivery, EventFanout, Target
from almanac.platform.store.models import Event, Run

EV, FO, D, R = Event.__table__, EventFanout.__table__, Delivery.__table__, Run.__table__


def order_key(schedule_id: int | None, job_key: str | None, run_id: int | None, event_id: int) -> str:
    if schedule_id is not None:
        return f"schedule:{schedule_id}"
    if job_key is not None:
        return f"job:{job_key}"[:220]
    return f"run:{run_id}" if run_id is not None else f"event:{event_id}"


def fan_out(session: Session, *, now: datetime, limit: int) -> int:
    """Turn up to `limit` new events, oldest first, into deliveries; returns how many were added."""
    new = session.execute(
        select(EV.c.id, EV.c.run_id, EV.c.topic, R.c.schedule_id, R.c.job_key)
        .outerjoin(R, R.c.id == EV.c.run_id)
        .where(~exists().where(FO.c.event_id == EV.c.id))
        .order_by(EV.c.id).limit(limit)
    ).all()
    if not new:
        return 0
    live = [(t.id, json.loads(t.topics)) for t in session.scalars(select(Target).where(Target.enabled.is_(True)))]
    added = 0
    for event in new:
        marker = dict(event_id=event.id, public_id="evt_" + uuid.uuid4().hex, schedule_id=event.schedule_id,
                      job_key=event.job_key, fanned_out_at=now)
        if not insert_ignore(session, FO, marker):
            continue  # another dispatcher fanned this one out
        key = order_key(event.schedule_id, event.job_key, event.run_id, event.id)
        for target_id, patterns in live:
            if targets_mod.matches(patterns, event.topic):
                added += int(insert_ignore(session, D, dict(
                    event_id=event.id, target_id=target_id, order_key=key, status=PENDING, attempts=0,
                    next_attempt_at=now, created_at=now, updated_at=now)))
    return added
