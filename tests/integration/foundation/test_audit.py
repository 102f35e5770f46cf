"""every change is audited (who, when, from where, what; never a secret)."""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable

import pytest

from almanac.tenants import audit, registry
from almanac.tenants.models import AuditEntry
from tests.support.routes import api_routes

SCRIPT = "export default async function (event) { return {ok: true}; }"
# POST routes that change nothing: they compute an answer.
NOT_CHANGES = {("POST", "/api/v1/recurrence/preview"), ("POST", "/api/v1/scripts/check")}


def _all(client: Any, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/v1/audit", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_every_changing_api_route_records_an_entry(app: Any) -> None:
    """A meta-test: a new route that changes something must call audit() (or fail here)."""
    silent = []
    for path, route in api_routes(app):
        for method in route.methods - {"GET", "HEAD", "OPTIONS"}:
            if path.startswith("/api/v1") and (method, path) not in NOT_CHANGES:
                source = inspect.getsource(route.endpoint)
                # run_now.run_and_wait writes the audit entry it is given (audit_entry=...)
                if "audit(" not in source and "run_now.run_and_wait(" not in source:
                    silent.append(f"{method} {path}")
    assert silent == []


def _do_everything(c: Any) -> dict[str, Any]:
    script = c.post("/api/v1/scripts", json={"name": "s", "source": SCRIPT}).json()
    c.put(f"/api/v1/scripts/{script['id']}", json={"source": SCRIPT + "\n"})
    sch = c.post("/api/v1/schedules", json={"name": "daily", "script_id": script["id"], "rule": "@daily"}).json()
    c.patch(f"/api/v1/schedules/{sch['id']}", json={"name": "every day"})
    for action in ("pause", "resume", "trigger"):
        assert c.post(f"/api/v1/schedules/{sch['id']}/{action}").status_code in (200, 202)
    c.delete(f"/api/v1/schedules/{sch['id']}")
    c.put("/api/v1/jobs/j1", json={"script_id": script["id"], "run_at": "2030-01-01T00:00:00Z"})
    c.put("/api/v1/jobs/j1", json={"script_id": script["id"], "run_at": "2030-01-02T00:00:00Z"})
    c.delete("/api/v1/jobs/j1")
    c.put("/api/v1/kv/k", json={"value": {"n": 1}})
    c.delete("/api/v1/kv/k")
    target = c.post("/api/v1/targets", json={"kind": "webhook", "name": "hook", "topics": ["*"],
                                             "url": "https://93.184.216.34/x"}).json()
    c.patch(f"/api/v1/targets/{target['id']}", json={"name": "hook 2"})
    rotated = c.post(f"/api/v1/targets/{target['id']}/rotate-secret").json()
    c.delete(f"/api/v1/targets/{target['id']}")
    token = c.post("/api/v1/tokens", json={"name": "bot", "role": "viewer"}).json()
    c.delete(f"/api/v1/tokens/{token['id']}")
    invitation = c.post("/api/v1/members", json={"email": "x@example.com", "role": "viewer"}).json()
    c.delete(f"/api/v1/invitations/{invitation['id']}")
    c.delete(f"/api/v1/scripts/{script['id']}")
    return {"secrets": [target["secret"], rotated["secret"], token["token"], invitation["invitation_url"]]}


EXPECTED = [
    "script.create", "script.update", "schedule.create", "schedule.update", "schedule.pause", "schedule.resume",
    "schedule.trigger", "schedule.delete", "job.create", "job.update", "job.cancel", "kv.put", "kv.delete",
    "target.create", "target.update", "target.rotate_secret", "target.delete", "token.create", "token.revoke",
    "invitation.create", "invitation.revoke", "script.delete",
]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # the route code is the same on both
def test_changes_through_the_api_are_recorded_with_actor_address_and_no_secrets(api: Callable[..., Any]) -> None:
    c = api("admin")
    done = _do_everything(c)
    entries = list(reversed(_all(c, limit=200)))  # oldest first
    assert [e["action"] for e in entries] == EXPECTED
    assert {(e["actor"], e["actor_kind"], e["address"]) for e in entries} == {("admin token", "token", "testclient")}
    assert entries[3]["changes"] == {"name": "every day"} and entries[3]["target"].startswith("schedule ")
    assert entries[11]["changes"] == {"value": {"n": 1}}
    text = json.dumps(entries)
    for secret in done["secrets"]:
        assert secret and secret.rsplit("/", 1)[-1] not in text
    other = api("admin")  # another tenant sees none of it
    assert _all(other) == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_paging_filters_and_bad_input(api: Callable[..., Any], issue_token: Callable[..., str]) -> None:
    c = api("admin")
    for i in range(5):
        c.put(f"/api/v1/kv/k{i}", json={"value": i})
    seen, cursor = [], None
    while True:
        page = c.get("/api/v1/audit", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [e["target"] for e in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [f"kv k{i}" for i in reversed(range(5))]
    assert _all(c, actor="admin token") and _all(c, actor="someone else") == []
    assert len(_all(c, since="2000-01-01T00:00:00")) == 5  # no offset: UTC
    assert _all(c, since="2100-01-01T00:00:00Z") == []
    for params in ({"cursor": "bogus"}, {"since": "9999-12-31T23:59:59-12:00"}, {"limit": 0}):
        bad = c.get("/api/v1/audit", params=params)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error", params
    for role in ("viewer", "editor"):
        other = api(role, tenant=c.tenant)
        assert other.get("/api/v1/audit").json()["error"]["code"] == "forbidden"


def test_an_entry_commits_and_rolls_back_with_its_change(database: Any, make_tenant: Callable[..., str],
                                                         now: Any) -> None:
    """The entry joins the tenant's unit of work (a shared-schema row in the tenant session)."""
    from almanac.platform.service import resources as service

    slug = make_tenant()
    with database.shared_session() as session:
        tenant_id = registry.get_tenant(session, slug).id
    who = audit.Actor("person", "ana@example.com", 1, "10.0.0.1")

    def change(key: str, fail: bool) -> None:
        with database.tenant_session(slug) as session:
            service.kv_put(session, key, 1, now)
            audit.record(session, tenant_id, who, "kv.put", target=f"kv {key}", changes={"value": 1}, now=now)
            if fail:
                raise RuntimeError("the change fails after its entry was added")

    with pytest.raises(RuntimeError):
        change("lost", fail=True)
    change("kept", fail=False)
    with database.shared_session() as session:
        assert [e.target for e in session.query(AuditEntry).filter_by(tenant_id=tenant_id)] == ["kv kept"]
    with database.tenant_session(slug) as session:
        assert [row.key for row in service.kv_list(session, "")[0]] == ["kept"]


def test_changes_are_redacted_shortened_and_storable() -> None:
    stored = json.loads(audit.dump_changes({
        "password": "hunter2-hunter2", "webhook_secret": "s", "Token": "t", "value": "v", "name": "n",
        "source": "x" * 5000, "nested": {"a": {"b": {"c": {"d": {"e": 1}}}}}, "lone": "\ud800",
    }, redact=("value",)))
    assert stored["password"] == stored["webhook_secret"] == stored["Token"] == stored["value"] == "[redacted]"
    assert stored["name"] == "n" and stored["source"].endswith("(5000 characters)") and len(stored["source"]) < 300
    assert stored["nested"]["a"]["b"]["c"] == "[1 fields]" and stored["lone"] == "?"
    huge = json.loads(audit.dump_changes({f"f{i}": "y" * 199 for i in range(40)}))
    assert huge["_shortened"] is True and len(audit.dump_changes({f"f{i}": "y" * 199 for i in range(40)})) < 4096
