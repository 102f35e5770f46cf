"""A tenant's history as the scheduler and dispatcher write it, for the operating pages' tests.

The pages only read these rows; writing them directly gives retries, emitted events with
deliveries, and a chain of follow-up jobs at exact times without running a scheduler.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from datetime import datetime, timedelta
from typing import Any

from almanac.delivery import targets
from almanac.delivery.models import Delivery
from almanac.platform.store.models import Event, Job, Occurrence, Run, Schedule, Script, ScriptVersion
from almanac.vault.keyring import Keyring

# A key of its own: the scene's webhook secrets are encrypted without touching any key file.
_KEYRING = Keyring("S3AHGcm2aOSzKX7l3KGLbkH_6qQpXfwrcTqpJH6l3gE=", Path("/nonexistent"))


@dataclass
class Seeded:
    schedule_id: int
    first_attempt: int  # run ids
    retry: int
    running: int
    chain_runs: list[int]
    event_id: int
    root_key: str = "check-7"


def _run(s: Any, **fields: Any) -> int:
    run = Run(trigger=fields.pop("trigger", "schedule"), created_at=fields["scheduled_for"], **fields)
    s.add(run)
    s.flush()
    return run.id


def _occurrence(s: Any, when: datetime, **fields: Any) -> int:
    occ = Occurrence(scheduled_for=when, priority=0, trigger="schedule", status="done", attempt=1,
                     created_at=when, **fields)
    s.add(occ)
    s.flush()
    return occ.id


def add_script(db: Any, tenant: str, now: datetime, name: str = "reporter") -> int:
    """A script row as the API stores it (no sandbox: the pages under test never run it)."""
    with db.tenant_session(tenant) as s:
        script = Script(name=name, current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, created_at=now,
                            source="export default async function (event) {\n  return {ok: true};\n}\n"))
        return script.id


def seed(db: Any, tenant: str, script_id: int, now: datetime) -> Seeded:
    """Schedule "nightly-report": a failed attempt and its succeeded retry (which emitted "report.ready",
    delivered once and dead once, and planned job check-7), a running occurrence; job chain check-7 →
    check-7-b → check-7-c with outcomes failed / succeeded / pending."""
    t0 = now - timedelta(hours=1)
    with db.tenant_session(tenant) as s:
        sch = Schedule(name="nightly-report", script_id=script_id, rule_text="every day at 2am", input_kind="text",
                       rrule="DTSTART;TZID=Europe/Berlin:20261101T020000\nRRULE:FREQ=DAILY", timezone="Europe/Berlin",
                       payload=json.dumps({"report": "sales"}), enabled=True, misfire="run_once",
                       catchup_window_s=86400, overlap="skip", max_attempts=3, retry_backoff_s=10, priority=0,
                       version=1, created_at=t0, updated_at=t0)
        s.add(sch)
        s.flush()
        occ = _occurrence(s, t0, schedule_id=sch.id)
        common = dict(occurrence_id=occ, schedule_id=sch.id, script_id=script_id, script_version=1, scheduled_for=t0)
        first = _run(s, **common, attempt=1, status="failed", started_at=t0 + timedelta(milliseconds=120),
                     finished_at=t0 + timedelta(milliseconds=450), duration_ms=330, error="TypeError: db is down",
                     error_line=3, logs=json.dumps(["connecting"]), reason="the script threw")
        retry = _run(s, **{**common, "trigger": "retry"}, attempt=2, status="succeeded",
                     started_at=t0 + timedelta(seconds=10, milliseconds=7),
                     finished_at=t0 + timedelta(seconds=10, milliseconds=900), duration_ms=893,
                     output=json.dumps({"rows": 42}), logs=json.dumps(["connecting", "done"]),
                     reason="the script returned")
        later = t0 + timedelta(minutes=30)
        occ2 = _occurrence(s, later, schedule_id=sch.id)
        running = _run(s, occurrence_id=occ2, schedule_id=sch.id, script_id=script_id, script_version=1,
                       scheduled_for=later, attempt=1, status="running", started_at=later)
        event = Event(run_id=retry, topic="report.ready", data=json.dumps({"rows": 42}), created_at=t0, attempts=0)
        s.add(event)
        s.flush()
        for name, status, code in (("Reports hook", "succeeded", 200), ("Broken hook", "dead", 500)):
            target, _ = targets.create(s, {"kind": "webhook", "name": name, "url": "https://93.184.216.34/h",
                                           "topics": ["report.*"]}, now=t0, allow_private=True,
                                           keyring=_KEYRING)
            s.add(Delivery(event_id=event.id, target_id=target.id, order_key=f"s{sch.id}", status=status,
                           attempts=1, last_status_code=code, last_latency_ms=25, created_at=t0, updated_at=t0,
                           last_error=None if code == 200 else "HTTP 500: no"))
        chain_runs = _chain(s, script_id, retry, t0)
        return Seeded(sch.id, first, retry, running, chain_runs, event.id)


def _chain(s: Any, script_id: int, planned_by: int, t0: datetime) -> list[int]:
    runs: list[int] = []
    parent = planned_by
    for depth, (key, status) in enumerate((("check-7", "failed"), ("check-7-b", "succeeded"),
                                           ("check-7-c", None))):
        when = t0 + timedelta(minutes=5 * (depth + 1))
        job = Job(key=key, script_id=script_id, run_at=when, payload=json.dumps({"order": 7}), max_attempts=1,
                  priority=0, state="done" if status else "pending", root_key="check-7", depth=depth,
                  created_by_run_id=parent, created_at=t0, updated_at=t0)
        s.add(job)
        s.flush()
        if status is None:
            break
        occ = _occurrence(s, when, job_id=job.id)
        parent = _run(s, occurrence_id=occ, job_key=key, script_id=script_id, script_version=1, trigger="job",
                      scheduled_for=when, attempt=1, status=status, started_at=when, finished_at=when,
                      duration_ms=40 * (depth + 1), error="not shipped yet" if status == "failed" else None)
        runs.append(parent)
    return runs
