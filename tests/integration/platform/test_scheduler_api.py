"""The scheduler's API routes end to end, on both databases, with the real sandbox and a manual clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # through the claim and record production runs on each backend

SOURCE = """
export default async function (event) {
  const seen = (await almanac.kv.get("seen")) ?? 0;
  await almanac.kv.set("seen", seen + 1);
  almanac.emit("seen", {seen});
  console.log("payload", JSON.stringify(event.payload));
  return {seen, attempt: event.attempt, jobKey: event.jobKey, scheduleId: event.scheduleId};
}
"""


def _script(client: Any, source: str = SOURCE, name: str = "counter") -> int:
    # A deadline no busy machine reaches: these runs are meant to finish, and the default 1 s ran out
    # on PostgreSQL at load 20 (CI, a kv.set loop).
    answer = client.post("/api/v1/scripts", json={"name": name, "source": source, "timeout_ms": 20_000})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_scripts(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    bad = admin.post("/api/v1/scripts", json={"name": "bad", "source": "export default function( {"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "script_syntax_error"
    assert bad.json()["error"]["details"]["line"] == 1
    assert admin.post("/api/v1/scripts", json={"name": "counter", "source": SOURCE}).status_code == 409
    changed = admin.put(f"/api/v1/scripts/{sid}", json={"source": SOURCE + "\n// v2"})
    assert changed.json()["version"] == 2
    ran = admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": {"x": 1}})
    assert ran.status_code == 200, ran.text
    run = ran.json()
    assert (run["status"], run["trigger"], run["output"]["seen"]) == ("succeeded", "manual", 0)
    assert run["logs"] == ['payload {"x":1}'] and run["script_version"] == 2
    assert admin.get("/api/v1/kv/seen").json()["value"] == 1
    viewer = api("viewer", tenant=admin.tenant)
    assert viewer.post("/api/v1/scripts", json={"name": "x", "source": SOURCE}).status_code == 403
    assert viewer.get(f"/api/v1/scripts/{sid}").json()["source"].endswith("// v2")


def test_schedules_lifecycle(api: Any, services: Any) -> None:
    editor_admin = api("admin")
    sid = _script(editor_admin)
    body = {"name": "every minute", "script_id": sid, "rule": "every minute", "timezone": "Europe/Berlin",
            "payload": {"order": 7}, "misfire": "run_all", "overlap": "queue", "priority": 3}
    created = editor_admin.post("/api/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    sch = created.json()
    assert sch["input_kind"] == "text" and "RRULE" in sch["rrule"] and sch["description"]
    assert sch["next_run_at"] is not None
    nxt = editor_admin.get(f"/api/v1/schedules/{sch['id']}/next?count=3").json()["next"]
    assert len(nxt) == 3
    tenant = editor_admin.tenant
    services.clock.advance(61)
    claims = services.scheduler.tick(tenant)
    assert len(claims) == 1
    runs = editor_admin.get(f"/api/v1/runs?schedule_id={sch['id']}").json()
    assert runs["items"][0]["status"] == "succeeded" and runs["items"][0]["output"]["scheduleId"] == sch["id"]

    paused = editor_admin.post(f"/api/v1/schedules/{sch['id']}/pause").json()
    assert paused["enabled"] is False and paused["next_run_at"] is None
    resumed = editor_admin.post(f"/api/v1/schedules/{sch['id']}/resume").json()
    assert resumed["next_run_at"] is not None
    assert editor_admin.post(f"/api/v1/schedules/{sch['id']}/trigger").status_code == 202
    assert [c.trigger for c in services.scheduler.tick(tenant)] == ["trigger"]
    patched = editor_admin.patch(f"/api/v1/schedules/{sch['id']}", json={"rule": "0 8 * * 1-5"}).json()
    assert patched["input_kind"] == "cron"
    assert editor_admin.delete(f"/api/v1/scripts/{sid}").status_code == 409
    assert editor_admin.delete(f"/api/v1/schedules/{sch['id']}").status_code == 204
    assert editor_admin.get(f"/api/v1/schedules/{sch['id']}").status_code == 404


def test_rule_errors_and_validation(api: Any) -> None:
    client = api("admin")
    sid = _script(client)
    base = {"name": "x", "script_id": sid, "timezone": "UTC"}
    assert client.post("/api/v1/schedules", json={**base, "rule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}).json()[
        "error"]["code"] == "never_fires"
    assert client.post("/api/v1/schedules", json={**base, "rule": "* * * * * *"}).json()["error"]["code"] == "too_frequent"
    assert client.post("/api/v1/schedules", json={**base, "rule": "whenever"}).json()["error"]["code"] == "invalid_rule"
    assert client.post("/api/v1/schedules", json={**base, "rule": "@daily", "extra": 1}).status_code == 422
    big = {**base, "rule": "@daily", "payload": "x" * 70_000}
    assert client.post("/api/v1/schedules", json=big).json()["error"]["code"] == "validation_error"


def test_jobs_by_key(api: Any, services: Any) -> None:
    client = api("editor")
    admin = api("admin", tenant=client.tenant)
    sid = _script(admin)
    when = services.clock.now() + timedelta(minutes=5)
    first = client.put("/api/v1/jobs/remind-7", json={"script_id": sid, "run_at": when.isoformat(),
                                                      "payload": {"order": 7}})
    assert first.status_code == 201 and first.json()["state"] == "pending"
    again = client.put("/api/v1/jobs/remind-7", json={"script_id": sid, "run_at": (when + timedelta(minutes=1)).isoformat()})
    assert again.status_code == 200
    services.clock.advance(minutes=6, seconds=1)
    (claim,) = services.scheduler.tick(client.tenant)
    assert claim.job_key == "remind-7"
    job = client.get("/api/v1/jobs/remind-7").json()
    assert job["state"] == "done" and job["next_run_at"] is None
    runs = client.get("/api/v1/runs?job_key=remind-7").json()["items"]
    assert runs[0]["output"]["jobKey"] == "remind-7"
    assert client.delete("/api/v1/jobs/remind-7").json()["state"] == "cancelled"
    assert client.get("/api/v1/jobs/nope").status_code == 404


def test_runs_pagination_and_filters(api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    for _ in range(5):
        admin.post(f"/api/v1/scripts/{sid}/run", json={})
    page = admin.get("/api/v1/runs?limit=2").json()
    ids = [r["id"] for r in page["items"]]
    while page["next_cursor"]:
        page = admin.get(f"/api/v1/runs?limit=2&cursor={page['next_cursor']}").json()
        ids += [r["id"] for r in page["items"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == 5
    assert admin.get("/api/v1/runs?status=failed").json()["items"] == []
    assert admin.get("/api/v1/runs?status=bogus").status_code == 422
    assert admin.get("/api/v1/runs?cursor=garbage").status_code == 422
    run_id = ids[0]
    assert admin.get(f"/api/v1/runs/{run_id}").json()["id"] == run_id


def test_another_tenants_objects_are_not_found(api: Any) -> None:
    mine, theirs = api("admin"), api("admin")
    sid = _script(theirs)
    ran = theirs.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert mine.get(f"/api/v1/scripts/{sid}").status_code == 404
    assert mine.get(f"/api/v1/runs/{ran['id']}").status_code == 404
    assert mine.get("/api/v1/kv/seen").status_code == 404


def test_kv(api: Any) -> None:
    client = api("editor")
    assert client.put("/api/v1/kv/a/b", json={"value": {"x": [1, 2]}}).status_code == 200
    client.put("/api/v1/kv/a/c", json={"value": 2})
    client.put("/api/v1/kv/z", json={"value": 3})
    assert [r["key"] for r in client.get("/api/v1/kv?prefix=a/").json()["items"]] == ["a/b", "a/c"]
    assert client.get("/api/v1/kv/a/b").json()["value"] == {"x": [1, 2]}
    assert client.delete("/api/v1/kv/a/b").status_code == 204
    assert client.get("/api/v1/kv/a/b").status_code == 404
    assert client.put("/api/v1/kv/big", json={"value": "x" * 70_000}).status_code == 422


def test_kv_pages_with_a_cursor(api: Any, services: Any, now: Any) -> None:
    """the list stopped silently at 1,000 keys; now it pages (at most 1,000) with a cursor."""
    from almanac.platform.store.models import KV

    client = api("viewer")
    with services.db.tenant_session(client.tenant) as session:
        session.add_all([KV(key=f"k{n:05d}", value=str(n), updated_at=now) for n in range(1001)])
    first = client.get("/api/v1/kv").json()
    assert len(first["items"]) == 1000 and first["next_cursor"]
    rest = client.get("/api/v1/kv", params={"cursor": first["next_cursor"]}).json()
    assert [r["key"] for r in rest["items"]] == ["k01000"] and rest["next_cursor"] is None
    keys, cursor = [], None
    while True:
        page = client.get("/api/v1/kv", params={"prefix": "k0000", "limit": 3, "cursor": cursor or ""}).json()
        keys += [r["key"] for r in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert keys == [f"k{n:05d}" for n in range(10)]
    assert client.get("/api/v1/kv", params={"limit": 1001}).status_code == 422
    assert client.get("/api/v1/kv", params={"cursor": "bogus!"}).json()["error"]["code"] == "validation_error"


def test_pause_after_failures_is_set_shown_and_checked(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    body = {"name": "watch", "script_id": sid, "rule": "every minute", "pause_after_failures": 3}
    created = admin.post("/api/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    assert (created.json()["pause_after_failures"], created.json()["paused_reason"]) == (3, None)
    patched = admin.patch(f"/api/v1/schedules/{created.json()['id']}", json={"pause_after_failures": None})
    assert patched.status_code == 200 and patched.json()["pause_after_failures"] is None
    bad = admin.post("/api/v1/schedules", json={**body, "pause_after_failures": 0})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"


def test_triggering_a_paused_schedule_is_refused_and_plans_nothing(api: Any, services: Any) -> None:
    """Paused means nothing runs: a trigger that answered 202 and never ran misled its caller."""
    editor = api("admin")
    sid = _script(editor)
    sch = editor.post("/api/v1/schedules", json={"name": "m", "script_id": sid, "rule": "every day at 9am"}).json()
    editor.post(f"/api/v1/schedules/{sch['id']}/pause")
    refused = editor.post(f"/api/v1/schedules/{sch['id']}/trigger")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "conflict" and "paused" in refused.json()["error"]["message"]
    assert services.scheduler.tick(editor.tenant) == []
    entries = editor.get("/api/v1/audit").json()["items"]
    assert "schedule.trigger" not in [e["action"] for e in entries]  # nothing happened, nothing recorded
    editor.post(f"/api/v1/schedules/{sch['id']}/resume")
    assert editor.post(f"/api/v1/schedules/{sch['id']}/trigger").status_code == 202
    assert [c.trigger for c in services.scheduler.tick(editor.tenant)] == ["trigger"]
