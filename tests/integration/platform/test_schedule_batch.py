"""a schedule batch stores exactly what creating its items one by one stores, on both databases.

`batch.create_schedules` takes a faster road than `service.create_schedule` (next_run_at written with
the row, and on PostgreSQL the rows and their occurrences by COPY): the rows, their occurrences and the
API's answer must not tell the two apart. A bad item still leaves nothing behind.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select

from almanac.platform.service import batch_writes as batch

from almanac.platform.service import resources as service
from almanac.platform.store.executemany import CopyRows
from almanac.platform.store.coordination_models import DueEntry
from almanac.platform.store.models import Occurrence, Schedule
from almanac.web.api.schemas_scheduler import ScheduleIn, ScheduleOut
from tests.integration.platform.test_batch_api import _count, _script

SKIP = {"id"}  # new ids differ; every other column must be equal


def _items(sid: int) -> list[dict[str, Any]]:
    """Items as the route hands them over (the request schema's defaults filled in), of every kind."""
    raw = [
        {"name": "daily", "script_id": sid, "rule": "@daily"},
        {"name": "berlin", "script_id": sid, "rule": "every weekday at 9am", "timezone": "Europe/Berlin",
         "payload": {"n": 1, "s": "ä"}, "priority": 7, "misfire": "skip", "overlap": "queue"},
        {"name": "off", "script_id": sid, "rule": "every 5 minutes", "enabled": False},
        {"name": "started", "script_id": sid, "rule": "FREQ=HOURLY;INTERVAL=2", "timezone": "America/New_York",
         "start": "2026-12-24T10:30:00-05:00", "expire_after_s": 60, "max_attempts": 5, "retry_backoff_s": 30,
         "pause_after_failures": 3, "catchup_window_s": 0, "payload": [1, 2.5, None]},
        {"name": "daily again", "script_id": sid, "rule": "@daily"},  # a repeated rule: parsed and planned once
        {"name": "cron", "script_id": sid, "rule": "30 4 * * 1", "timezone": "Asia/Kolkata", "priority": -3},
    ]
    return [ScheduleIn.model_validate(item, strict=False).model_dump() for item in raw]


def _stored(services: Any, tenant: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tenant's schedules (without ids, by id) and their occurrences (schedule as its position)."""
    with services.db.tenant_session(tenant) as s:
        schedules = list(s.execute(select(Schedule).order_by(Schedule.id)).scalars())
        position = {sch.id: i for i, sch in enumerate(schedules)}
        rows = [{c.key: getattr(sch, c.key) for c in Schedule.__table__.columns if c.key not in SKIP}
                for sch in schedules]
        occurrences = sorted(
            ({**{c.key: getattr(o, c.key) for c in Occurrence.__table__.columns if c.key not in SKIP},
              "schedule_id": position[o.schedule_id]}
             for o in s.execute(select(Occurrence)).scalars()), key=lambda o: o["schedule_id"])
    return rows, occurrences


def test_a_batch_stores_what_one_by_one_stores(services: Any, make_tenant: Any) -> None:
    one, many = make_tenant(), make_tenant()
    now = services.clock.now()
    by_one, by_batch = _script(services, one), _script(services, many)
    assert by_one == by_batch  # so that the rows can be compared whole
    with services.db.tenant_session(one) as s:
        for item in _items(by_one):
            service.create_schedule(s, services.store.rules, item, now=now, min_interval_s=60)
    with services.db.tenant_session(many) as s:
        created = batch.create_schedules(s, services.store.rules, _items(by_batch), now=now, min_interval_s=60)
    single_rows, single_occurrences = _stored(services, one)
    batch_rows, batch_occurrences = _stored(services, many)
    assert batch_rows == single_rows
    assert batch_occurrences == single_occurrences
    assert len(batch_occurrences) == 5  # one each, none for the disabled one
    assert [sch.next_run_at for sch in created] == [row["next_run_at"] for row in batch_rows]
    assert all(row["next_run_at"] is None or row["next_run_at"].tzinfo is timezone.utc for row in batch_rows)


def test_a_bad_item_leaves_no_row_and_no_occurrence(services: Any, make_tenant: Any) -> None:
    tenant = make_tenant()
    sid = _script(services, tenant)
    items = _items(sid) * 3
    items[-1] = dict(items[-1], rule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")  # never fires
    with pytest.raises(batch.BatchRefused) as refused, services.db.tenant_session(tenant) as s:
        batch.create_schedules(s, services.store.rules, items, now=services.clock.now(), min_interval_s=60)
    assert [e["index"] for e in refused.value.details["errors"]] == [len(items) - 1]
    assert _count(services, tenant, Schedule) == 0 and _count(services, tenant, Occurrence) == 0
    with services.db.tenant_session(tenant) as s:  # the same tenant's next batch goes in whole
        created = batch.create_schedules(s, services.store.rules, items[:-1], now=services.clock.now(),
                                         min_interval_s=60)
    assert _count(services, tenant, Schedule) == len(created) == len(items) - 1


def test_the_answer_is_what_get_answers_for_each(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    body = [{k: v.isoformat() if isinstance(v, datetime) else v for k, v in item.items() if v is not None}
            for item in _items(sid)]
    answer = editor.post("/api/v1/schedules/batch", json={"schedules": body})
    assert answer.status_code == 201 and answer.headers["content-type"] == "application/json"
    items = answer.json()["items"]
    assert [i["name"] for i in items] == [b["name"] for b in body]
    for item in items:
        assert list(item) == list(ScheduleOut.model_fields)  # the schema's order, as a model would give
        assert item == editor.get(f"/api/v1/schedules/{item['id']}").json()


def test_copy_rows_apply_the_columns_bind_processors(services: Any, make_tenant: Any) -> None:
    """A naive time is refused by COPY as by INSERT (UTCDateTime); an aware one is stored as its instant."""
    if services.db.engine.dialect.name != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    tenant = make_tenant()
    columns = ("scheduled_for", "due_at", "priority", "trigger", "status", "attempt", "created_at", "schedule_id")
    copy = CopyRows(Occurrence.__table__, columns)
    at = datetime(2026, 12, 1, 9, 0, tzinfo=timezone(timedelta(hours=-5)))
    with services.db.tenant_session(tenant) as s:
        copy.write(s.connection(), [(at, at, 0, "schedule", "planned", 0, at, 1),
                                    (at, None, 0, "schedule", "planned", 0, at, 2)])
    with services.db.tenant_session(tenant) as s:
        stored = list(s.execute(select(Occurrence).order_by(Occurrence.schedule_id)).scalars())
        assert [(o.schedule_id, o.scheduled_for, o.due_at) for o in stored] == [(1, at, at), (2, at, None)]
        assert stored[0].scheduled_for.tzinfo is timezone.utc
        with pytest.raises(ValueError, match="naive"):
            copy.write(s.connection(), [(at.replace(tzinfo=None), at, 0, "schedule", "planned", 0, at, 3)])


def test_the_due_index_mirrors_a_batch_s_occurrences(services: Any, make_tenant: Any) -> None:
    """On PostgreSQL the due index is kept by a row trigger on occurrences: COPY fires it as INSERT does."""
    if services.db.engine.dialect.name != "postgresql":
        pytest.skip("the due index is PostgreSQL's")
    tenant = make_tenant()
    sid = _script(services, tenant)
    with services.db.tenant_session(tenant) as s:
        batch.create_schedules(s, services.store.rules, _items(sid), now=services.clock.now(), min_interval_s=60)
    with services.db.tenant_session(tenant) as s:
        planned = {(o.id, o.due_at) for o in s.execute(select(Occurrence)).scalars()}
    with services.db.shared_session() as s:
        indexed = {(row.occurrence_id, row.due_at) for row in s.execute(
            select(DueEntry).where(DueEntry.tenant_slug == tenant)).scalars()}
    assert indexed == planned and len(planned) == 5
