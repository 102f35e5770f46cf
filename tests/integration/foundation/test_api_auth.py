"""Authentication, the role gate, tokens and members over HTTP, with the error envelope."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient

from tests.support.routes import api_routes

pytestmark = pytest.mark.any_backend  # no SQL here that differs between the backends


def _assert_envelope(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"]


def test_no_token_malformed_token_and_unknown_token_are_401(app: Any, api: Callable[..., Any]) -> None:
    api()  # makes a tenant
    anonymous = TestClient(app)
    _assert_envelope(anonymous.get("/api/v1/tenant"), 401, "unauthorized")
    _assert_envelope(anonymous.get("/api/v1/tenant", headers={"Authorization": "Bearer nope"}), 401, "unauthorized")
    forged = "alm_abcdefghijkl_" + "x" * 43
    _assert_envelope(anonymous.get("/api/v1/tenant", headers={"Authorization": f"Bearer {forged}"}), 401, "unauthorized")


def test_token_identifies_tenant_and_role(api: Callable[..., Any]) -> None:
    client = api("editor")
    body = client.get("/api/v1/tenant").json()
    assert body["slug"] == client.tenant and body["role"] == "editor" and body["min_interval_seconds"] == 60


def test_role_gate_refuses_lower_roles(api: Callable[..., Any], make_tenant: Callable[..., str]) -> None:
    tenant = make_tenant()
    viewer, editor = api("viewer", tenant), api("editor", tenant)
    _assert_envelope(editor.get("/api/v1/tokens"), 403, "forbidden")
    _assert_envelope(viewer.post("/api/v1/tokens", json={"name": "x", "role": "viewer"}), 403, "forbidden")
    _assert_envelope(editor.get("/api/v1/members"), 403, "forbidden")
    assert viewer.get("/api/v1/tenant").status_code == 200


def test_tokens_are_shown_once_record_last_use_and_can_be_revoked(api: Callable[..., Any], app: Any) -> None:
    admin = api("admin")
    created = admin.post("/api/v1/tokens", json={"name": "ci", "role": "viewer"})
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("alm_")
    listed = admin.get("/api/v1/tokens").json()
    mine = next(t for t in listed if t["id"] == created.json()["id"])
    assert mine["token"] is None and mine["last_used_at"] is None
    fresh = TestClient(app)
    assert fresh.get("/api/v1/tenant", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    mine = next(t for t in admin.get("/api/v1/tokens").json() if t["id"] == created.json()["id"])
    assert mine["last_used_at"] is not None
    assert admin.delete(f"/api/v1/tokens/{mine['id']}").json()["revoked_at"] is not None
    _assert_envelope(fresh.get("/api/v1/tenant", headers={"Authorization": f"Bearer {token}"}), 401, "unauthorized")


def test_members_are_invited_changed_and_removed_but_one_admin_stays(api: Callable[..., Any], app: Any) -> None:
    import re

    from fastapi.testclient import TestClient

    admin = api("admin")
    invited = admin.post("/api/v1/members", json={"email": "Ed@Example.com", "role": "editor"})
    assert invited.status_code == 201 and invited.json()["email"] == "ed@example.com"
    assert invited.json()["status"] == "pending" and "password" not in invited.text
    ed = TestClient(app, follow_redirects=False)  # Ed opens the link and chooses a password
    page = ed.get(invited.json()["invitation_url"].replace("http://testserver", ""))
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    accepted = ed.post(page.url.path, data={"csrf_token": csrf, "password": "eds-own-password",
                                           "password_repeat": "eds-own-password"})
    assert accepted.status_code == 303, accepted.text
    user_id = next(m["user_id"] for m in admin.get("/api/v1/members").json() if m["email"] == "ed@example.com")
    assert admin.patch(f"/api/v1/members/{user_id}", json={"role": "viewer"}).json()["role"] == "viewer"
    assert admin.delete(f"/api/v1/members/{user_id}").status_code == 204
    admins = [m for m in admin.get("/api/v1/members").json() if m["role"] == "admin"]
    _assert_envelope(admin.delete(f"/api/v1/members/{admins[0]['user_id']}"), 409, "conflict")


def test_validation_404_and_405_use_the_envelope(api: Callable[..., Any]) -> None:
    admin = api("admin")
    _assert_envelope(admin.post("/api/v1/tokens", json={"name": "x", "role": "king"}), 422, "validation_error")
    _assert_envelope(admin.post("/api/v1/tokens", json={"name": "x", "role": "viewer", "extra": 1}), 422, "validation_error")
    _assert_envelope(admin.post("/api/v1/tokens", content=b"{not json", headers={"content-type": "application/json"}), 422, "validation_error")
    _assert_envelope(admin.get("/api/v1/nothing-here"), 404, "not_found")
    _assert_envelope(admin.delete("/api/v1/tokens/notanumber"), 404, "not_found")  # SPEC 3: not a valid id at all
    _assert_envelope(admin.put("/api/v1/tenant"), 405, "method_not_allowed")


def test_operations_endpoints(app: Any) -> None:
    client = TestClient(app)
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    assert client.get("/metrics").status_code == 200
    assert "/api/v1/tokens" in client.get("/openapi.json").json()["paths"]
    assert client.get("/docs").status_code == 200


def test_every_api_route_carries_the_role_gate(app: Any) -> None:
    from almanac.web.deps import RoleGate

    routes = [(path, route) for path, route in api_routes(app) if path.startswith("/api/v1")]
    assert len(routes) >= 8
    missing = [
        f"{sorted(route.methods)} {path}"
        for path, route in routes
        if not any(isinstance(dep.call, RoleGate) for dep in route.dependant.dependencies)
    ]
    assert missing == []
