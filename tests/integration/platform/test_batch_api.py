"""`POST /api/v1/jobs/batch` and `POST /api/v1/schedules/batch` (SPEC sections 7 and 8), on both databases.

Up to 1,000 items in one transaction with a handful of statements (not a loop of single upserts);
a bad item refuses the whole batch, naming it by index, and changes nothing; over 1,000 is refused;
quotas count the whole batch; another tenant's scripts are unknown ids.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator

import psycopg
import pytest
from sqlalchemy import event, func, select

from almanac.platform import notify

from almanac.platform.store import quotas
from almanac.platform.store.models import Job, Occurrence, Schedule, Script, ScriptVersion

RUN_AT = "2026-12-01T09:00:00Z"


def _script(services: Any, tenant: str) -> int:
    """A script row without the sandbox: the batch routes only need it to exist."""
    now = services.clock.now()
    with services.db.tenant_session(tenant) as s:
        name = f"noop-{s.execute(select(func.count()).select_from(Script)).scalar_one()}"
        script = Script(name=name, current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1;", created_at=now))
        return script.id


def _count(services: Any, tenant: str, model: Any, *where: Any) -> int:
    with services.db.tenant_session(tenant) as s:
        return s.execute(select(func.count()).select_from(model).where(*where)).scalar_one()


@contextmanager
def _statements(services: Any) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement[:60])

    event.listen(services.db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(services.db.engine, "before_cursor_execute", record)


def _jobs(sid: int, n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"key": f"job-{i}", "script_id": sid, "run_at": RUN_AT, **extra} for i in range(n)]


def test_a_thousand_jobs_in_one_transaction_then_unchanged_and_replaced(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    with _statements(services) as seen:
        answer = editor.post("/api/v1/jobs/batch", json={"jobs": _jobs(sid, 1000, payload={"n": 1})})
    assert answer.status_code == 200, answer.text
    items = answer.json()["items"]
    assert [(i["index"], i["key"], i["outcome"], i["state"]) for i in items[:2]] == [
        (0, "job-0", "created", "pending"), (1, "job-1", "created", "pending")]
    assert {i["outcome"] for i in items} == {"created"} and len(items) == 1000
    # Batched, not a loop: a few statements for 1,000 items (auth, lookups, bulk inserts, audit, commit).
    from collections import Counter
    assert len(seen) < 40, Counter(seen).most_common(5)
    assert _count(services, editor.tenant, Job) == 1000
    assert _count(services, editor.tenant, Occurrence, Occurrence.job_id.is_not(None)) == 1000

    jobs = _jobs(sid, 3, payload={"n": 1})
    jobs[1]["run_at"] = "2026-12-02T09:00:00Z"  # a new time replaces the plan
    jobs[2]["priority"] = 5  # another change keeps the plan
    again = editor.post("/api/v1/jobs/batch", json={"jobs": jobs}).json()["items"]
    assert [i["outcome"] for i in again] == ["unchanged", "replaced", "replaced"]
    single = editor.get("/api/v1/jobs/job-1").json()
    assert single["next_run_at"].startswith("2026-12-02T09:00:00") and single["state"] == "pending"
    with services.db.tenant_session(editor.tenant) as s:
        job2 = s.execute(select(Job.id).where(Job.key == "job-2")).scalar_one()
        assert s.execute(select(Occurrence.priority).where(Occurrence.job_id == job2)).scalar_one() == 5
    assert _count(services, editor.tenant, Occurrence, Occurrence.job_id.is_not(None)) == 1000


def test_a_bad_item_refuses_the_whole_batch_by_index(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    jobs = _jobs(sid, 1000)
    jobs[500]["script_id"] = sid + 1000  # no such script
    answer = editor.post("/api/v1/jobs/batch", json={"jobs": jobs})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and "item 500" in error["message"]
    assert [e["index"] for e in error["details"]["errors"]] == [500]
    assert _count(services, editor.tenant, Job) == 0 and _count(services, editor.tenant, Occurrence) == 0

    jobs = _jobs(sid, 5)
    jobs[3]["key"] = "job-1"  # a key twice
    twice = editor.post("/api/v1/jobs/batch", json={"jobs": jobs}).json()["error"]
    assert "item 3" in twice["message"] and twice["details"]["errors"][0]["index"] == 3

    jobs = _jobs(sid, 5)
    jobs[2]["run_at"] = "2026-12-01T09:00:00"  # no offset: the item's own validation, by index
    schema = editor.post("/api/v1/jobs/batch", json={"jobs": jobs})
    assert schema.status_code == 422 and "jobs.2.run_at" in schema.json()["error"]["message"]
    assert _count(services, editor.tenant, Job) == 0


def test_over_a_thousand_is_refused_and_a_full_batch_fits_the_body_limit(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    over = editor.post("/api/v1/jobs/batch", json={"jobs": _jobs(sid, 1001)})
    assert over.status_code == 422 and over.json()["error"]["code"] == "validation_error"
    schedules = [{"name": f"s{i}", "script_id": sid, "rule": "@daily"} for i in range(1001)]
    assert editor.post("/api/v1/schedules/batch", json={"schedules": schedules}).status_code == 422
    assert _count(services, editor.tenant, Job) == 0 and _count(services, editor.tenant, Schedule) == 0
    big = _jobs(sid, 1000, payload={"note": "x" * 1500})  # ~1.6 MB: over the 1 MiB default, within the batch limit
    assert editor.post("/api/v1/jobs/batch", json={"jobs": big}).status_code == 200
    assert editor.put("/api/v1/kv/k", json={"value": "x" * (1024 * 1024 + 10)}).status_code == 413


def test_quotas_count_the_whole_batch(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    with services.db.shared_session() as s:
        quotas.set_quotas(s, editor.tenant, {"pending_jobs": 10, "schedules": 5}, services.clock.now())
    refused = editor.post("/api/v1/jobs/batch", json={"jobs": _jobs(sid, 11)})
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "quota_exceeded"
    assert _count(services, editor.tenant, Job) == 0
    assert editor.post("/api/v1/jobs/batch", json={"jobs": _jobs(sid, 10)}).status_code == 200
    replaced = _jobs(sid, 10, payload=2)  # replacing pending jobs adds none
    assert editor.post("/api/v1/jobs/batch", json={"jobs": replaced}).status_code == 200
    schedules = [{"name": f"s{i}", "script_id": sid, "rule": "@daily"} for i in range(6)]
    assert editor.post("/api/v1/schedules/batch", json={"schedules": schedules}).status_code == 429
    assert _count(services, editor.tenant, Schedule) == 0


def test_another_tenants_script_is_an_unknown_id(api: Any, services: Any) -> None:
    mine, theirs = api("editor"), api("editor")
    _script(services, mine.tenant)
    _script(services, theirs.tenant)
    their_second = _script(services, theirs.tenant)  # an id that exists only in the other tenant
    answer = mine.post("/api/v1/jobs/batch", json={"jobs": _jobs(their_second, 2)})
    assert answer.status_code == 422 and "item 0" in answer.json()["error"]["message"]
    schedules = [{"name": "x", "script_id": their_second, "rule": "@daily"}]
    assert "item 0" in mine.post("/api/v1/schedules/batch", json={"schedules": schedules}).json()["error"]["message"]
    # The same keys in two tenants are two jobs, each in its own schema.
    assert theirs.post("/api/v1/jobs/batch", json={"jobs": _jobs(their_second, 2)}).status_code == 200
    assert _count(services, mine.tenant, Job) == 0 and _count(services, theirs.tenant, Job) == 2


def test_a_thousand_schedules_all_or_none(api: Any, services: Any) -> None:
    editor = api("editor")
    sid = _script(services, editor.tenant)
    schedules = [{"name": f"s{i}", "script_id": sid, "rule": "every 5 minutes" if i % 2 else "@daily",
                  "timezone": "Europe/Berlin", "payload": {"i": i}} for i in range(1000)]
    schedules[3]["rule"] = "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"  # never fires
    schedules[7]["rule"] = "not a rule at all"
    answer = editor.post("/api/v1/schedules/batch", json={"schedules": schedules})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert "item 3" in error["message"] and "item 7" in error["message"]
    assert [(e["index"], e["code"]) for e in error["details"]["errors"]] == [(3, "never_fires"), (7, "invalid_rule")]
    assert _count(services, editor.tenant, Schedule) == 0

    schedules[3]["rule"] = schedules[7]["rule"] = "@hourly"
    schedules[9]["enabled"] = False
    with _statements(services) as seen:
        created = editor.post("/api/v1/schedules/batch", json={"schedules": schedules})
    assert created.status_code == 201, created.text
    assert len(seen) < 40, seen
    items = created.json()["items"]
    assert [i["name"] for i in items] == [f"s{i}" for i in range(1000)]
    assert items[1]["description"] and items[1]["next_run_at"] is not None and items[9]["next_run_at"] is None
    assert items[5]["payload"] == {"i": 5}
    one = editor.get(f"/api/v1/schedules/{items[1]['id']}").json()
    assert one["next_run_at"] == items[1]["next_run_at"] and one["timezone"] == "Europe/Berlin"
    assert _count(services, editor.tenant, Schedule) == 1000
    assert _count(services, editor.tenant, Occurrence) == 999  # the disabled one plans nothing


def test_a_single_put_of_a_new_job_is_six_statements_and_answers_its_next_run(api: Any, services: Any) -> None:
    """The single-PUT path: job (locked), script and quota (override and count) in one, job,
    occurrence, audit entry, and the wake-up sent in the same transaction. The token was verified by
    the request before (cached), next_run_at is the new job's run_at, not a query."""
    editor = api("editor")
    sid = _script(services, editor.tenant)
    body = {"script_id": sid, "run_at": RUN_AT, "payload": {"n": 1}}
    assert editor.put("/api/v1/jobs/first", json=body).status_code == 201
    with _statements(services) as seen:
        answer = editor.put("/api/v1/jobs/second", json=body)
    assert answer.status_code == 201 and answer.json()["next_run_at"].startswith("2026-12-01T09:00:00")
    seen = [s for s in seen if not s.startswith("BEGIN")]  # SQLite's BEGIN IMMEDIATE is a statement here
    wake = 1 if services.db.engine.dialect.name == "postgresql" else 0
    assert len(seen) <= 5 + wake, seen
    again = editor.put("/api/v1/jobs/second", json=body)  # unchanged: next_run_at from the database
    assert again.status_code == 200 and again.json()["next_run_at"] == answer.json()["next_run_at"]


def test_a_put_notifies_other_processes_only_of_work_due_within_a_timers_longest_sleep(
        api: Any, services: Any) -> None:
    """Every timer looks at the due index at least every IDLE_S and then sleeps only until the earliest
    due time it saw: a job due in ten days needs no NOTIFY (a statement a PUT); one due now does."""
    if services.db.engine.dialect.name != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL's (one process on SQLite: its timer is woken in-process)")
    editor = api("editor")
    sid = _script(services, editor.tenant)
    url = services.db.settings.database_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(url, autocommit=True) as listener:  # what other processes hear
        listener.execute(f"LISTEN {notify.CHANNEL}")
        assert editor.put("/api/v1/jobs/later", json={"script_id": sid, "run_at": RUN_AT}).status_code == 201
        soon = (services.clock.now() + timedelta(seconds=3)).isoformat()
        assert editor.put("/api/v1/jobs/soon", json={"script_id": sid, "run_at": soon}).status_code == 201
        heard = [n.payload for n in listener.notifies(timeout=1, stop_after=2)]
    assert heard == [editor.tenant]  # one wake-up, for the job due soon
