"""Tenant isolation: a token of tenant A gets 404 for tenant B's objects on every route with an id.

The route list comes from the app itself, so a new route with a path parameter fails
`test_every_route_with_an_id_is_covered` until it is added to BODIES (or UPSERTS) here.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.support.routes import api_routes

SCRIPT = "export default async function (event) { almanac.emit(\"b.happened\", {n: 1}); return {ok: true}; }"
# A body A may send to each route with an id, valid apart from the id (so only the id can fail).
BODIES: dict[tuple[str, str], Any] = {
    ("GET", "/api/v1/jobs/{key}"): None,
    ("DELETE", "/api/v1/jobs/{key}"): None,
    ("GET", "/api/v1/kv/{key:path}"): None,
    ("DELETE", "/api/v1/kv/{key:path}"): None,
    ("PATCH", "/api/v1/members/{user_id}"): {"role": "viewer"},
    ("DELETE", "/api/v1/members/{user_id}"): None,
    ("DELETE", "/api/v1/invitations/{invitation_id}"): None,
    ("GET", "/api/v1/runs/{run_id}"): None,
    ("GET", "/api/v1/schedules/{schedule_id}"): None,
    ("PATCH", "/api/v1/schedules/{schedule_id}"): {"name": "stolen"},
    ("DELETE", "/api/v1/schedules/{schedule_id}"): None,
    ("POST", "/api/v1/schedules/{schedule_id}/pause"): None,
    ("POST", "/api/v1/schedules/{schedule_id}/resume"): None,
    ("POST", "/api/v1/schedules/{schedule_id}/trigger"): None,
    ("GET", "/api/v1/schedules/{schedule_id}/next"): None,
    ("GET", "/api/v1/scripts/{script_id}"): None,
    ("PUT", "/api/v1/scripts/{script_id}"): {"source": SCRIPT},
    ("DELETE", "/api/v1/scripts/{script_id}"): None,
    ("POST", "/api/v1/scripts/{script_id}/run"): {"payload": {}},
    ("GET", "/api/v1/scripts/{script_id}/versions"): None,
    ("GET", "/api/v1/scripts/{script_id}/versions/{version}"): None,
    ("GET", "/api/v1/targets/{target_id}"): None,
    ("PATCH", "/api/v1/targets/{target_id}"): {"name": "stolen"},
    ("POST", "/api/v1/targets/{target_id}/rotate-secret"): None,
    ("DELETE", "/api/v1/targets/{target_id}"): None,
    ("DELETE", "/api/v1/tokens/{token_id}"): None,
    ("GET", "/api/v1/deliveries/{delivery_id}"): None,
    ("POST", "/api/v1/deliveries/{delivery_id}/retry"): None,
    ("GET", "/api/v1/events/{event_id}/deliveries"): None,
    ("GET", "/api/v1/targets/{target_id}/deliveries"): None,
    ("DELETE", "/api/v1/secrets/{name}"): None,
    ("GET", "/api/v1/calendars/{name}"): None,  # B's calendar is named as B's secret is
    ("DELETE", "/api/v1/calendars/{name}"): None,
}
# Keys are names inside the caller's own namespace: A writing key "k" makes A's "k", never B's.
UPSERTS = {("PUT", "/api/v1/jobs/{key}"), ("PUT", "/api/v1/kv/{key:path}"), ("PUT", "/api/v1/secrets/{name}"),
           ("PUT", "/api/v1/calendars/{name}")}


def _b_objects(b: Any, database: Any = None, now: Any = None) -> dict[str, Any]:
    """One of each object in tenant B, keyed by the path parameter names that address them."""
    script = b.post("/api/v1/scripts", json={"name": "b-script", "source": SCRIPT})
    assert script.status_code == 201, script.text
    script_id = script.json()["id"]
    schedule = b.post("/api/v1/schedules", json={"name": "b-daily", "script_id": script_id, "rule": "@daily"})
    assert schedule.status_code == 201, schedule.text
    job = b.put("/api/v1/jobs/b-job", json={"script_id": script_id, "run_at": "2030-01-01T00:00:00Z"})
    assert job.status_code in (200, 201), job.text
    assert b.put("/api/v1/kv/b-key", json={"value": {"secret": "of b"}}).status_code in (200, 201)
    assert b.put("/api/v1/secrets/B_SECRET", json={"value": "b's own"}).status_code == 201
    assert b.put("/api/v1/calendars/B_SECRET", json={"weekend": ["sunday"]}).status_code == 201
    target = b.post("/api/v1/targets", json={
        "kind": "email", "name": "b-mail", "topics": ["*"], "recipients": ["ops@b.test"],
        "subject_template": "{{ topic }}", "body_template": "{{ data }}",
    })
    assert target.status_code == 201, target.text
    run = b.post(f"/api/v1/scripts/{script_id}/run", json={"payload": {}})
    assert run.status_code == 200, run.text
    invitation = b.post("/api/v1/members", json={"email": "someone@b.test", "role": "editor"})
    member = b.get("/api/v1/members").json()[0]  # B's admin
    token = b.post("/api/v1/tokens", json={"name": "b-token", "role": "viewer"})
    delivery_id = event_id = 999_999
    if database is not None:  # the run emitted an event: fan it out so B has a delivery too
        from almanac.delivery import fanout

        with database.tenant_session(b.tenant) as session:
            fanout.fan_out(session, now=now, limit=10)
        delivery = b.get("/api/v1/deliveries").json()["items"][0]
        delivery_id, event_id = delivery["id"], delivery["event_id"]
    return {
        "script_id": script_id, "version": 1, "schedule_id": schedule.json()["id"], "key": "b-job",
        "key:path": "b-key", "run_id": run.json()["id"], "user_id": member["user_id"],
        "invitation_id": invitation.json()["id"], "token_id": token.json()["id"],
        "target_id": target.json()["id"], "delivery_id": delivery_id, "event_id": event_id, "name": "B_SECRET",
    }


def _fill(path: str, ids: dict[str, Any], route_key: tuple[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", str(value))
    if route_key[1].startswith("/api/v1/kv/"):
        path = path.replace("b-job", "b-key")
    return path


@pytest.fixture
def tenants(api: Callable[..., Any]) -> tuple[Any, Any]:
    return api("admin"), api("admin")


def test_every_route_with_an_id_is_covered(app: Any) -> None:
    with_ids = {(m, p) for p, r in api_routes(app) if "{" in p and p.startswith("/api/v1") for m in r.methods}
    assert with_ids - set(BODIES) - UPSERTS == set()


def test_a_gets_404_for_every_object_of_b(app: Any, tenants: tuple[Any, Any], database: Any, now: Any) -> None:
    a, b = tenants
    ids = _b_objects(b, database, now)
    wrong = []
    for path, route in api_routes(app):
        for method in route.methods:
            key = (method, path)
            if key not in BODIES:
                continue
            url = path.replace("{key:path}", ids["key:path"]).replace("{key}", ids["key"])
            url = _fill(url, ids, key)
            response = a.request(method, url, json=BODIES[key]) if BODIES[key] is not None else a.request(method, url)
            if response.status_code != 404 or response.json()["error"]["code"] != "not_found":
                wrong.append(f"{method} {url} -> {response.status_code} {response.text[:120]}")
    assert wrong == []
    # ...and B still has everything, unchanged.
    assert b.get(f"/api/v1/schedules/{ids['schedule_id']}").json()["name"] == "b-daily"
    assert b.get("/api/v1/kv/b-key").json()["value"] == {"secret": "of b"}
    assert [item["name"] for item in b.get("/api/v1/secrets").json()["items"]] == ["B_SECRET"]


def test_lists_and_upserts_stay_in_the_callers_tenant(tenants: tuple[Any, Any]) -> None:
    a, b = tenants
    ids = _b_objects(b)
    assert a.get("/api/v1/scripts").json() == [] or all(s["name"] != "b-script" for s in a.get("/api/v1/scripts").json())
    assert a.get("/api/v1/schedules").json() == []
    assert a.get("/api/v1/runs").json()["items"] == []
    assert a.get("/api/v1/kv").json()["items"] == []
    assert a.get("/api/v1/targets").json() == []
    # A writing B's key names writes A's own key; B's value is untouched.
    assert a.put("/api/v1/kv/b-key", json={"value": "of a"}).status_code in (200, 201)
    assert b.get("/api/v1/kv/b-key").json()["value"] == {"secret": "of b"}
    # A job of A cannot point at B's script.
    response = a.put("/api/v1/jobs/b-job", json={"script_id": ids["script_id"], "run_at": "2030-01-01T00:00:00Z"})
    assert response.status_code == 404
    assert b.get("/api/v1/jobs/b-job").json()["script_id"] == ids["script_id"]
    # Nor a schedule.
    response = a.post("/api/v1/schedules", json={"name": "x", "script_id": ids["script_id"], "rule": "@daily"})
    assert response.status_code == 404
