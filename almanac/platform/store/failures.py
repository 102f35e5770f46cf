"""Failures in a row (SPEC section 7): the `almanac.run.failed` event, and a schedule that pauses itself.

Called in the finishing transaction with the attempts that ended for good (no
retry left, or none allowed): each failed one emits `almanac.run.failed` into the
tenant's event outbox (delivered like a script's own events, to the targets whose
topics match); a schedule's failures in a row are counted, reset by a success,
and at `pause_after_failures` the schedule pauses itself with the reason shown,
emitting `almanac.schedule.paused`. Manual runs count for nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.orm import Session

from almanac.platform.store.models import PLANNED, QUEUED, RETRYABLE, Event, Occurrence, Schedule

EV, O, S = (cast(Table, m.__table__) for m in (Event, Occurrence, Schedule))  # Core tables, typed as such
RUN_FAILED, SCHEDULE_PAUSED = "almanac.run.failed", "almanac.schedule.paused"
ERROR_IN_EVENT = 1000  # characters of the run's error carried by its event

_RESET = update(S).where(S.c.id.in_(bindparam("b_ids", expanding=True)), S.c.failures_in_row != 0).values(
    failures_in_row=0)


def _emit(s: Session, run_id: int | None, topic: str, data: dict[str, Any], now: datetime) -> None:
    s.execute(EV.insert().values(run_id=run_id, topic=topic, data=json.dumps(data), created_at=now, attempts=0))


def record_endings(s: Session, ended: Sequence[tuple[Any, Any]], now: datetime) -> None:
    """`ended`: (claim, outcome) of attempts that ended for good in this transaction."""
    succeeded = sorted({c.schedule_id for c, o in ended if c.schedule_id is not None and o.status == "succeeded"})
    if succeeded:
        s.execute(_RESET, {"b_ids": succeeded})
    for claim, outcome in ended:
        if outcome.status not in RETRYABLE or claim.occurrence_id is None:
            continue
        error = (outcome.error or "")[:ERROR_IN_EVENT].encode("utf-8", "replace").decode("utf-8")
        _emit(s, claim.run_id, RUN_FAILED, dict(
            run_id=claim.run_id, schedule_id=claim.schedule_id, job_key=claim.job_key, status=outcome.status,
            attempt=claim.attempt, scheduled_for=claim.scheduled_for.isoformat(), error=error), now)
        if claim.schedule_id is not None:
            _count_failure(s, claim, now)


def _count_failure(s: Session, claim: Any, now: datetime) -> None:
    s.execute(update(S).where(S.c.id == claim.schedule_id).values(failures_in_row=S.c.failures_in_row + 1))
    sch = s.execute(select(S.c.id, S.c.name, S.c.enabled, S.c.pause_after_failures, S.c.failures_in_row)
                    .where(S.c.id == claim.schedule_id)).first()
    if sch is None or not sch.enabled or sch.pause_after_failures is None \
            or sch.failures_in_row < sch.pause_after_failures:
        return
    runs = "run" if sch.failures_in_row == 1 else "runs"
    reason = f"paused itself after {sch.failures_in_row} failed {runs} in a row (pause_after_failures)"
    s.execute(update(S).where(S.c.id == sch.id).values(
        enabled=False, version=S.c.version + 1, paused_reason=reason, next_run_at=None, updated_at=now))
    s.execute(delete(O).where(O.c.schedule_id == sch.id, O.c.status.in_((PLANNED, QUEUED))))
    _emit(s, claim.run_id, SCHEDULE_PAUSED, dict(schedule_id=sch.id, name=sch.name, reason=reason,
                                                 failures_in_row=sch.failures_in_row), now)
