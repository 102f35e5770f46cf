"""`PUT /api/v1/jobs/{key}` served by `almanac.web.fastput` answers exactly what FastAPI's route does.

The same scenario runs in two tenants, one with the fast path and one through FastAPI
(`app.state.fast_put = False`): created, replaced (new payload and priority; new time), the same
body again, cancelled then put again, a job that already ran at its time (done), an unknown script,
the pending-jobs quota. Status, content type and body bytes must be equal, and so must the rows
(jobs, occurrences) and the audit entries. Requests the fast path leaves alone (no cached token,
another role, a bad body) still get FastAPI's answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select, update

from almanac.platform.service import job_create

from almanac.platform.store import quotas
from almanac.platform.store.models import Job, Occurrence
from almanac.tenants import audit as audit_log, registry
from almanac.web.fastput import FastPut
from tests.integration.platform.test_batch_api import _script

RUN_AT = "2026-12-01T09:00:00Z"


@contextmanager
def _served(monkeypatch: Any) -> Iterator[list[bool]]:
    """Whether each PUT to the jobs route was served by the fast path (True) or passed on (False)."""
    seen: list[bool] = []
    original = FastPut._serve

    async def spy(self: FastPut, *args: Any) -> bool:
        served = await original(self, *args)
        seen.append(served)
        return served

    monkeypatch.setattr(FastPut, "_serve", spy)
    yield seen


def _scenario(client: Any, services: Any, sid: int) -> list[tuple[int, str, bytes]]:
    answers = []

    def put(key: str, **body: Any) -> None:
        answer = client.put(f"/api/v1/jobs/{key}", json={"script_id": sid, **body})
        answers.append((answer.status_code, answer.headers["content-type"], answer.content))

    put("a", run_at="2026-12-01T11:00:00+02:00", payload={"n": 1, "s": "é"}, priority=5, expire_after_s=60)
    services.clock.advance(1)
    put("a", run_at="2026-12-01T11:00:00+02:00", payload={"n": 2}, priority=-3)  # same time: reprioritised
    put("a", run_at="2026-12-02T09:00:00Z", max_attempts=7)  # a new time: replanned
    put("a", run_at="2026-12-02T09:00:00Z", max_attempts=7)  # the same body again
    client.delete("/api/v1/jobs/a")
    services.clock.advance(1)
    put("a", run_at="2026-12-02T09:00:00Z")  # cancelled: planned again
    put("b", run_at=RUN_AT)
    with services.db.tenant_session(client.tenant) as s:  # b ran at its time
        job_id = s.execute(select(Job.id).where(Job.key == "b")).scalar_one()
        s.execute(update(Occurrence).where(Occurrence.job_id == job_id).values(status="done"))
    client.delete("/api/v1/jobs/b")
    put("b", run_at=RUN_AT)  # cancelled, the same time again: it ran already, so done
    put("c", run_at=RUN_AT, payload=None)
    put("d", run_at=RUN_AT, script_id=sid + 100)  # no such script: 404
    with services.db.shared_session() as shared:
        quotas.set_quotas(shared, client.tenant, {"pending_jobs": 2}, services.clock.now())
    put("e", run_at=RUN_AT)  # a third pending job: 429
    put("a", run_at="2026-12-03T09:00:00Z")  # replacing a pending job is free
    return answers


def _rows(services: Any, tenant: str) -> dict[str, Any]:
    with services.db.tenant_session(tenant) as s:
        jobs = [tuple(row)[1:] for row in s.execute(select(Job.__table__).order_by(Job.key))]
        occurrences = [(row.job_id, row.scheduled_for, row.due_at, row.priority, row.trigger, row.status)
                       for row in s.execute(select(Occurrence.__table__).order_by(Occurrence.id))]
    with services.db.shared_session() as shared:
        tenant_id = registry.get_tenant(shared, tenant).id
        entries, _ = audit_log.page(shared, tenant_id, limit=200)
        audit = [(e.at, e.actor_kind, e.actor, e.address, e.action, e.target, e.changes) for e in entries]
    return {"jobs": jobs, "occurrences": occurrences, "audit": audit}


def test_the_fast_path_answers_and_stores_what_the_route_does(api: Any, services: Any, app: Any,
                                                               monkeypatch: Any) -> None:
    fast, slow = api("editor"), api("editor")
    fast_sid, slow_sid = _script(services, fast.tenant), _script(services, slow.tenant)
    assert fast_sid == slow_sid  # each tenant's first script
    start = services.clock.now()
    fast.get("/api/v1/jobs/none")  # each token verified (and cached) before the scenario
    slow.get("/api/v1/jobs/none")
    with _served(monkeypatch) as served:
        fast_answers = _scenario(fast, services, fast_sid)
    assert served == [True] * len(fast_answers)
    services.clock.set(start)  # the same times in both tenants
    app.state.fast_put = False
    try:
        with _served(monkeypatch) as served:
            slow_answers = _scenario(slow, services, slow_sid)
        assert served == [False] * len(slow_answers)
    finally:
        app.state.fast_put = True
    statuses = [status for status, _, _ in fast_answers]
    assert statuses == [201, 200, 200, 200, 200, 201, 200, 201, 404, 429, 200], fast_answers
    assert fast_answers == slow_answers
    assert b'"state":"done"' in fast_answers[6][2] and b'"state":"pending"' in fast_answers[5][2]
    assert b'"code":"not_found"' in fast_answers[8][2] and b'"code":"quota_exceeded"' in fast_answers[9][2]
    fast_rows, slow_rows = _rows(services, fast.tenant), _rows(services, slow.tenant)
    assert fast_rows == slow_rows
    assert [a[4] for a in fast_rows["audit"]].count("job.create") == 3


def test_what_the_fast_path_leaves_to_fastapi(api: Any, services: Any, monkeypatch: Any) -> None:
    editor = api("editor")
    viewer = api("viewer", tenant=editor.tenant)
    sid = _script(services, editor.tenant)
    body = {"script_id": sid, "run_at": RUN_AT}
    with _served(monkeypatch) as served:
        first = editor.put("/api/v1/jobs/x", json=body)  # the token is not cached yet
        assert first.status_code == 201
        assert editor.put("/api/v1/jobs/x", json=body).status_code == 200
        viewer.get("/api/v1/jobs/x")
        assert viewer.put("/api/v1/jobs/y", json=body).json()["error"]["code"] == "forbidden"
        bad = editor.put("/api/v1/jobs/y", json={**body, "run_at": "2026-12-01T09:00:00"})  # no offset
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"
        extra = editor.put("/api/v1/jobs/y", json={**body, "colour": "red"})
        assert extra.status_code == 422
        deep = editor.put("/api/v1/jobs/y", content=b'{"a":' * 70 + b"1" + b"}" * 70,
                          headers={"content-type": "application/json"})
        assert deep.status_code == 422
        assert editor.put("/api/v1/jobs/" + "k" * 201, json=body).status_code == 422
        form = editor.put("/api/v1/jobs/y", content=b"script_id=1", headers={"content-type": "text/plain"})
        assert form.status_code == 422
        nobody = editor.put("/api/v1/jobs/y", json=body, headers={"Authorization": "Bearer nope"})
        assert nobody.status_code == 401
    assert served == [False, True, False, False, False, False, False, False, False]
    with services.db.tenant_session(editor.tenant) as s:
        assert s.execute(select(Job.key)).scalars().all() == ["x"]


def test_a_new_job_is_one_statement_on_postgresql_four_on_sqlite(api: Any, services: Any, monkeypatch: Any) -> None:
    """PostgreSQL: one statement in autocommit makes the job, its occurrence and the audit entry
    (`platform/service/job_create.py`; no BEGIN, no COMMIT). SQLite: one SELECT (job locked, script, quota),
    the job, its occurrence, the audit entry. Neither: an ORM flush, a token lookup (cached), a
    next_run_at query, or (a job due in ten days) a NOTIFY."""
    from tests.integration.platform.test_batch_api import _statements

    editor = api("editor")
    sid = _script(services, editor.tenant)
    body = {"script_id": sid, "run_at": RUN_AT}
    assert editor.put("/api/v1/jobs/first", json=body).status_code == 201
    with _served(monkeypatch) as served, _statements(services) as seen:
        assert editor.put("/api/v1/jobs/second", json=body).status_code == 201
    seen = [s for s in seen if not s.startswith("BEGIN")]  # SQLite's BEGIN IMMEDIATE
    assert served == [True]
    if services.db.is_sqlite:
        assert len(seen) == 4, seen
    else:
        assert len(seen) == 1 and seen[0].startswith("WITH"), seen
        with _statements(services) as seen:  # a key that exists: the one statement, then the transaction
            assert editor.put("/api/v1/jobs/second", json={**body, "priority": 3}).status_code == 200
        assert seen[0].startswith("WITH") and len(seen) > 1, seen


def test_one_statement_and_the_transaction_answer_and_store_the_same(api: Any, services: Any,
                                                                    monkeypatch: Any) -> None:
    """The scenario above, once with PostgreSQL's one-statement creation and once with every PUT
    through `put_job`'s transaction: the same answers, rows and audit entries."""
    if services.db.is_sqlite:
        pytest.skip("SQLite always takes the transaction")
    one, whole = api("editor"), api("editor")
    one_sid, whole_sid = _script(services, one.tenant), _script(services, whole.tenant)
    start = services.clock.now()
    made: list[bool] = []
    original = job_create.create_job

    def spy(*args: Any, **kwargs: Any) -> Any:
        job = original(*args, **kwargs)
        made.append(job is not None)
        return job

    monkeypatch.setattr(job_create, "create_job", spy)
    one_answers = _scenario(one, services, one_sid)
    assert made == [True, False, False, False, False, True, False, True, False, False, False]  # a, b, c made at once
    services.clock.set(start)
    monkeypatch.setattr(job_create, "create_job", lambda *args, **kwargs: None)
    whole_answers = _scenario(whole, services, whole_sid)
    assert one_answers == whole_answers
    assert _rows(services, one.tenant) == _rows(services, whole.tenant)
