"""One grammar of job keys for every way a job is named (SPEC section 8), so every route can address it.

A key is one path segment of `/api/v1/jobs/{key}`: the single PUT (its fast path and FastAPI's route),
the batch and a script's `schedule.at` refuse the same keys (`/`, `.` and `..`, control characters,
surrounding spaces, the `run:` prefix of a run's chain), and any key they accept can be read and
cancelled through GET and DELETE, percent-encoded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import func, select

from almanac.platform.store.models import Job, Script, ScriptVersion

RUN_AT = "2030-01-01T09:00:00Z"
REFUSED = ["a/b", "x/../victim", ".", "..", "tab\there", " padded", "padded ", "run:12", "x" * 201]
ADDRESSABLE = ["order 7", "ä-7", "q?a=1&b#frag", "100%", "a\\b", "...", "run-12", "runs:1", "x" * 200]


def _script(services: Any, tenant: str) -> int:
    now = services.clock.now()
    with services.db.tenant_session(tenant) as s:
        script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1;", created_at=now))
        return script.id


def _jobs(services: Any, tenant: str) -> int:
    with services.db.tenant_session(tenant) as s:
        return s.execute(select(func.count()).select_from(Job)).scalar_one()


def _path(key: str) -> str:
    return "/api/v1/jobs/" + quote(key, safe="")


@pytest.mark.parametrize("key", REFUSED, ids=repr)
def test_a_key_no_route_could_address_is_refused_by_put_and_batch(api: Any, services: Any, key: str) -> None:
    client = api("editor")
    sid = _script(services, client.tenant)
    body = {"script_id": sid, "run_at": RUN_AT}
    if "/" not in key and key.strip("."):  # a client resolves '.' and '..', and a '/' is another route
        put = client.put(_path(key), json=body)
        assert put.status_code == 422 and put.json()["error"]["code"] == "validation_error", put.text
    batch = client.post("/api/v1/jobs/batch", json={"jobs": [{"key": "fine", **body}, {"key": key, **body}]})
    assert batch.status_code == 422 and batch.json()["error"]["code"] == "validation_error", batch.text
    assert _jobs(services, client.tenant) == 0


@pytest.mark.parametrize("key", ADDRESSABLE, ids=repr)
def test_every_key_put_accepts_can_be_read_and_cancelled(api: Any, services: Any, key: str) -> None:
    client = api("editor")
    sid = _script(services, client.tenant)
    batch = client.post("/api/v1/jobs/batch", json={"jobs": [{"key": key, "script_id": sid, "run_at": RUN_AT}]})
    assert batch.status_code == 200, batch.text
    assert client.put(_path(key), json={"script_id": sid, "run_at": RUN_AT, "priority": 1}).status_code == 200
    assert client.get(_path(key)).json()["key"] == key
    assert client.delete(_path(key)).json()["state"] == "cancelled"


def test_schedule_at_refuses_the_keys_the_api_refuses(api: Any, services: Any) -> None:
    admin = api("admin")
    source = """
    export default async function () {
      const refused = [];
      for (const key of ["x/../victim", "..", "run:1", " x"]) {
        try { await almanac.schedule.at("2027-01-01T09:00:00Z", null, {key}); } catch (e) { refused.push(e.message); }
      }
      await almanac.schedule.at("2027-01-01T09:00:00Z", null, {key: "fine"});
      return refused;
    }
    """
    made = admin.post("/api/v1/scripts", json={"name": "keys", "source": source, "timeout_ms": 20_000})
    assert made.status_code == 201, made.text
    run = admin.post(f"/api/v1/scripts/{made.json()['id']}/run", json={}).json()
    assert run["status"] == "succeeded", run
    assert len(run["output"]) == 4 and all("job key" in message for message in run["output"])
    assert admin.get("/api/v1/jobs/fine").status_code == 200 and _jobs(services, admin.tenant) == 1
