"""What one run's page shows besides the run row: what it was given, what it emitted and where
that went, the follow-ups it planned, its other attempts, and the chain it belongs to.

Read-only queries in the caller's tenant session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.delivery.models import Delivery, Target
from almanac.platform.store.models import Event, Job, Run, Schedule


@dataclass
class RunContext:
    event: Any = None
    # True for runs recorded before the event was kept (t0008): rebuilt from today's payload.
    event_rebuilt: bool = False
    emitted: list[dict[str, Any]] = field(default_factory=list)  # {event, deliveries: [(delivery, target name)]}
    follow_ups: list[Job] = field(default_factory=list)
    attempts: list[Run] = field(default_factory=list)  # every attempt of the occurrence, this one included
    job: Job | None = None
    schedule: Schedule | None = None
    cpu_ms: int | None = None
    http: list[dict[str, Any]] = field(default_factory=list)


def _stored(run: Run, name: str) -> Any:
    """A run's stored `event`, `cpu_ms` or `http` (JSON text decoded); None when absent.

    `http` (the run's fetches) is added by the fetch work in its own migration: read by name
    so this page shows it as soon as it exists, and an empty state until then.
    """
    value = getattr(run, name, None)
    if isinstance(value, str) and name in ("event", "http"):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


FETCH_FIELDS = ("method", "url", "status", "error", "bytes", "duration_ms")


def fetch_rows(value: Any) -> list[dict[str, Any]]:
    """A run's `http` record as the page's rows: every field present (None when the record lacks it).

    The record is written by the fetch work; the page must not break on a field it leaves out,
    nor on a value that is not a list of objects (shown as no fetches).
    """
    if not isinstance(value, list):
        return []
    return [{name: item.get(name) for name in FETCH_FIELDS} for item in value if isinstance(item, dict)]


def rebuilt_event(run: Run, payload: Any) -> dict[str, Any]:
    """The event of SPEC section 6 as the script saw it, from the run's row and its owner's payload."""
    fired = run.started_at or run.created_at
    return {
        "payload": payload,
        "scheduledFor": run.scheduled_for.isoformat().replace("+00:00", "Z"),
        "firedAt": fired.isoformat().replace("+00:00", "Z") if fired else None,
        "attempt": run.attempt,
        "scheduleId": run.schedule_id,
        "jobKey": run.job_key,
        "runId": run.id,
    }


def start_lag_ms(planned: datetime | None, started: datetime | None) -> int | None:
    """How long after its planned time a run's script started; None until it has started."""
    if planned is None or started is None:
        return None
    return round((_aware(started) - _aware(planned)).total_seconds() * 1000)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes for columns stored as UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def lag_text(ms: int | None) -> str:
    """A start lag as a person reads it: "312 ms", "2.5 s", "3 min 12 s", "2 h 5 min"; "—" before it started."""
    if ms is None:
        return "—"
    sign, ms = ("−", -ms) if ms < 0 else ("", ms)
    if ms < 1000:
        text = f"{ms} ms"
    elif ms < 60_000:
        text = f"{ms // 100 / 10:.1f} s"  # tenths, cut rather than rounded: never "60.0 s"
    elif ms < 3_600_000:
        text = f"{ms // 60_000} min {ms % 60_000 // 1000} s"
    else:
        text = f"{ms // 3_600_000} h {ms % 3_600_000 // 60_000} min"
    return sign + text


def run_context(s: Session, run: Run) -> RunContext:
    ctx = RunContext(cpu_ms=_stored(run, "cpu_ms"), http=fetch_rows(_stored(run, "http")))
    if run.schedule_id is not None:
        ctx.schedule = s.get(Schedule, run.schedule_id)
    if run.job_key is not None:
        ctx.job = s.execute(select(Job).where(Job.key == run.job_key)).scalar_one_or_none()
    ctx.event = _stored(run, "event")
    if ctx.event is None:
        owner = ctx.schedule or ctx.job
        if owner is not None:
            ctx.event, ctx.event_rebuilt = rebuilt_event(run, json.loads(owner.payload)), True
    ctx.emitted = emitted(s, run.id)
    ctx.follow_ups = list(s.execute(select(Job).where(Job.created_by_run_id == run.id).order_by(Job.id)).scalars())
    if run.occurrence_id is not None:
        query = select(Run).where(Run.occurrence_id == run.occurrence_id).order_by(Run.attempt, Run.id)
        ctx.attempts = list(s.execute(query).scalars())
    return ctx


def emitted(s: Session, run_id: int) -> list[dict[str, Any]]:
    """The events a run emitted, each with its deliveries and their targets' names."""
    events = list(s.execute(select(Event).where(Event.run_id == run_id).order_by(Event.id)).scalars())
    if not events:
        return []
    ids = [e.id for e in events]
    rows = s.execute(
        select(Delivery, Target.name).join(Target, Target.id == Delivery.target_id)
        .where(Delivery.event_id.in_(ids)).order_by(Delivery.id)
    ).all()
    by_event: dict[int, list[tuple[Delivery, str]]] = {}
    for delivery, name in rows:
        by_event.setdefault(delivery.event_id, []).append((delivery, name))
    return [{"event": e, "data": _pretty(e.data), "deliveries": by_event.get(e.id, [])} for e in events]


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def chain(s: Session, root_key: str, limit: int = 200) -> list[tuple[Job, Run | None]]:
    """A chain from its root job through its follow-ups (by depth, then creation), each with its newest run."""
    jobs = list(s.execute(
        select(Job).where(Job.root_key == root_key).order_by(Job.depth, Job.id).limit(limit)
    ).scalars())
    if not jobs:
        return []
    keys = [j.key for j in jobs]
    newest: dict[str, Run] = {}
    for run in s.execute(select(Run).where(Run.job_key.in_(keys)).order_by(Run.id)).scalars():
        newest[run.job_key or ""] = run
    return [(job, newest.get(job.key)) for job in jobs]
