"""Helpers for the scheduler's integration tests: a real database (SQLite and PostgreSQL),
a manual clock, a simple "every N seconds" rule, and a Python function as the script runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import select

from almanac.db import Database
from almanac.platform.store import planning
from almanac.platform.clock import ManualClock
from almanac.platform.store.models import Job, Occurrence, Run, Schedule, Script, ScriptVersion
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import Scheduler
from almanac.platform.timer.claim_paths import AcrossTenants

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


class EveryRules:
    """`rrule` "EVERY n": every n seconds from 2026-01-01 (stands in for real recurrence rules)."""

    def next_after(self, rrule: str, input_kind: str, after: datetime) -> datetime | None:
        step = int(rrule.split()[1])
        if rrule.startswith("ONCE"):
            when = EPOCH + timedelta(seconds=step)
            return when if when > after else None
        n = int((after - EPOCH).total_seconds() // step) + 1
        return EPOCH + timedelta(seconds=n * step)

    def times_between(self, rrule: str, input_kind: str, after: datetime, until: datetime, cap: int) -> list[datetime]:
        times: list[datetime] = []
        t = self.next_after(rrule, input_kind, after)
        while t is not None and t <= until and len(times) < cap:
            times.append(t)
            t = self.next_after(rrule, input_kind, t)
        return times


@dataclass
class World:
    db: Database
    tenant: str
    clock: ManualClock
    store: SqlStore
    scheduler: Scheduler
    calls: list[dict[str, Any]] = field(default_factory=list)
    behaviour: Callable[[str, dict[str, Any], Any], Any] | None = None

    def session(self) -> Any:
        return self.db.tenant_session(self.tenant)

    def add_script(self, name: str = "s", source: str = "export default () => 1", timeout_ms: int = 1000) -> int:
        now = self.clock.now()
        with self.session() as s:
            script = Script(name=name, current_version=1, timeout_ms=timeout_ms, memory_mb=32,
                            created_at=now, updated_at=now)
            s.add(script)
            s.flush()
            s.add(ScriptVersion(script_id=script.id, version=1, source=source, created_at=now))
            return script.id

    def add_schedule(self, script_id: int, every: int = 60, *, enabled: bool = True, **policy: Any) -> int:
        now = self.clock.now()
        fields = dict(misfire="run_once", catchup_window_s=86400, overlap="skip", expire_after_s=None,
                      max_attempts=3, retry_backoff_s=10, priority=0)
        fields.update(policy)
        with self.session() as s:
            sch = Schedule(name="sch", script_id=script_id, rule_text=f"EVERY {every}", input_kind="test",
                           rrule=f"EVERY {every}", timezone="UTC", payload=json.dumps({"n": 1}), enabled=enabled,
                           version=1, created_at=now, updated_at=now, **fields)
            s.add(sch)
            s.flush()
            planning.replan_schedule(s, sch, now, self.store.rules)
            return sch.id

    def put_job(self, key: str, script_id: int, run_at: datetime, **extra: Any) -> None:
        fields = dict(script_id=script_id, run_at=run_at, payload=json.dumps(extra.pop("payload", None)),
                      expire_after_s=None, max_attempts=3, priority=0)
        fields.update(extra)
        with self.session() as s:
            planning.upsert_job(s, key, fields, now=self.clock.now())

    def runs(self, **where: Any) -> list[Run]:
        with self.session() as s:
            query = select(Run).order_by(Run.id)
            for name, value in where.items():
                query = query.where(getattr(Run, name) == value)
            return list(s.execute(query).scalars())

    def occurrences(self, **where: Any) -> list[Occurrence]:
        with self.session() as s:
            query = select(Occurrence).order_by(Occurrence.scheduled_for)
            for name, value in where.items():
                query = query.where(getattr(Occurrence, name) == value)
            return list(s.execute(query).scalars())

    def job(self, key: str) -> Job:
        with self.session() as s:
            return s.execute(select(Job).where(Job.key == key)).scalar_one()

    def schedule(self, sid: int) -> Schedule:
        with self.session() as s:
            return s.get(Schedule, sid)

    def tick(self) -> list[Any]:
        return self.scheduler.tick(self.tenant)

    def claim(self, limit: int = 10) -> list[Any]:
        """Claim what is due now without running it, the way this world's scheduler claims."""
        if isinstance(self.scheduler.path, AcrossTenants):
            return list(self.store.due_index.claim_across(self.clock.now(), limit).claims)
        return list(self.store.claim_due(self.tenant, self.clock.now(), limit).claims)
