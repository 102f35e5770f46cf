"""Business calendars through the API (SPEC section 5), on SQLite and PostgreSQL: stored per tenant,
built-in by place, validated at the door, audited, and refused for deletion while a schedule names them."""

from __future__ import annotations

import pytest

OFFICE = {"country": "DE", "subdivision": "BY", "weekend": ["saturday", "sunday"],
          "closed": [{"first": "2026-12-24", "last": "2026-12-31", "label": "Winter shutdown"}]}


def _script(client) -> int:
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;\n"})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_a_calendar_is_stored_listed_read_replaced_and_deleted_by_an_admin(api) -> None:
    admin = api()
    created = admin.put("/api/v1/calendars/office", json=OFFICE)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == "office" and body["builtin"] is False and body["subdivision"] == "BY"
    assert body["closed"] == [{"first": "2026-12-24", "last": "2026-12-31", "label": "Winter shutdown"}]
    assert body["updated_by"]
    assert admin.put("/api/v1/calendars/office", json={**OFFICE, "weekend": ["friday", "saturday"]}).status_code == 200
    assert admin.get("/api/v1/calendars/office").json()["weekend"] == ["friday", "saturday"]
    assert [c["name"] for c in admin.get("/api/v1/calendars").json()["items"]] == ["office"]
    actions = [e["action"] for e in admin.get("/api/v1/audit").json()["items"]]
    assert actions.count("calendar.put") == 2
    assert admin.delete("/api/v1/calendars/office").status_code == 204
    assert admin.get("/api/v1/calendars/office").json()["error"]["code"] == "not_found"
    assert "calendar.delete" in [e["action"] for e in admin.get("/api/v1/audit").json()["items"]]


def test_members_read_admins_write_and_tenants_never_see_each_other(api) -> None:
    admin = api()
    assert admin.put("/api/v1/calendars/office", json=OFFICE).status_code == 201
    viewer = api("viewer", tenant=admin.tenant)
    assert viewer.get("/api/v1/calendars/office").status_code == 200
    assert viewer.put("/api/v1/calendars/office", json=OFFICE).status_code == 403
    assert api("editor", tenant=admin.tenant).delete("/api/v1/calendars/office").status_code == 403
    other = api()
    assert other.get("/api/v1/calendars/office").status_code == 404
    assert other.get("/api/v1/calendars").json()["items"] == []
    assert other.delete("/api/v1/calendars/office").status_code == 404


def test_a_place_code_is_a_built_in_calendar_until_the_tenant_stores_one_of_that_name(api) -> None:
    admin = api()
    builtin = admin.get("/api/v1/calendars/DE-BY")
    assert builtin.status_code == 200, builtin.text
    assert builtin.json() | {"updated_at": None} == {
        "name": "DE-BY", "country": "DE", "subdivision": "BY", "closed": [], "weekend": ["saturday", "sunday"],
        "builtin": True, "updated_at": None, "updated_by": None}
    assert admin.get("/api/v1/calendars/US-NY").json()["builtin"] is True
    assert admin.get("/api/v1/calendars/XX").status_code == 404
    assert admin.delete("/api/v1/calendars/DE").status_code == 404
    assert admin.put("/api/v1/calendars/DE", json={"country": "DE", "weekend": ["sunday"]}).status_code == 201
    assert admin.get("/api/v1/calendars/DE").json()["builtin"] is False


@pytest.mark.parametrize(("body", "words"), [
    ({"country": "ZZ"}, "not a country"),
    ({"country": "DE", "subdivision": "QQ"}, "not a subdivision"),
    ({"subdivision": "BY"}, "needs a country"),
    ({"closed": [{"first": "2026-12-24", "label": "a"}] * 501}, ""),
    ({"closed": [{"first": "2026-12-24", "label": "shut\u0000down"}]}, "NUL"),
    ({"closed": [{"first": "2026-12-24", "label": "shut\u0007down"}]}, "control characters"),
    ({"closed": [{"first": "2026-12-31", "last": "2026-12-01"}]}, "ends before"),
    ({"closed": [{"first": "2026-02-30"}]}, "YYYY-MM-DD"),
    ({"weekend": ["caturday"]}, "not a weekday"),
    ({"weekend": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]}, "no business day"),
    ({"country": "DE", "extra": 1}, ""),
])
def test_a_bad_calendar_is_refused_in_the_envelope_and_changes_nothing(api, body, words) -> None:
    admin = api()
    answer = admin.put("/api/v1/calendars/office", json=body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and words in error["message"]
    assert admin.get("/api/v1/calendars").json()["items"] == []


def test_a_huge_body_is_refused_with_413(api) -> None:
    answer = api().put("/api/v1/calendars/office", content=b'{"closed": [' + b" " * (1 << 20) + b"]}",
                       headers={"content-type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"


def test_a_calendar_a_schedule_names_cannot_be_deleted(api) -> None:
    admin = api()
    assert admin.put("/api/v1/calendars/office", json=OFFICE).status_code == 201
    made = admin.post("/api/v1/schedules", json={"name": "payroll", "script_id": _script(admin),
                                                 "rule": "every day at 10:00", "timezone": "Europe/Berlin",
                                                 "calendar": "office", "calendar_policy": "before"})
    assert made.status_code == 201, made.text
    refused = admin.delete("/api/v1/calendars/office")
    assert refused.status_code == 409 and "payroll" in refused.json()["error"]["message"]
    assert admin.delete(f"/api/v1/schedules/{made.json()['id']}").status_code == 204
    assert admin.delete("/api/v1/calendars/office").status_code == 204
