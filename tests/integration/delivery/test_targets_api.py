"""Targets API: create (secret shown once), read, change, rotate, delete, and what is refused."""

from __future__ import annotations

from typing import Any, Callable

import pytest

pytestmark = pytest.mark.any_backend  # no SQL here that differs between the backends

HOOK = {"kind": "webhook", "name": "orders", "url": "https://93.184.216.34/hooks/almanac", "topics": ["order.*"]}
MAIL = {"kind": "email", "name": "ops", "recipients": ["ops@example.com"], "topics": ["*"],
        "subject_template": "{{ event.topic }}", "body_template": "Data: {{ event.data.order }}"}


def test_webhook_secret_is_shown_once(api: Callable[..., Any]) -> None:
    client = api()
    made = client.post("/api/v1/targets", json=HOOK)
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["secret"].startswith("whsec_") and body["url"] == HOOK["url"] and body["enabled"] is True
    again = client.get(f"/api/v1/targets/{body['id']}").json()
    assert again["secret"] is None and again["topics"] == ["order.*"]
    assert [t["id"] for t in client.get("/api/v1/targets").json()] == [body["id"]]
    rotated = client.post(f"/api/v1/targets/{body['id']}/rotate-secret").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != body["secret"]


def test_email_target_and_changes(api: Callable[..., Any]) -> None:
    client = api()
    made = client.post("/api/v1/targets", json=MAIL).json()
    assert made["recipients"] == ["ops@example.com"] and made["secret"] is None
    changed = client.patch(f"/api/v1/targets/{made['id']}", json={"enabled": False, "topics": ["a", "b.*"]}).json()
    assert changed["enabled"] is False and changed["topics"] == ["a", "b.*"]
    assert client.delete(f"/api/v1/targets/{made['id']}").status_code == 204
    assert client.get(f"/api/v1/targets/{made['id']}").json()["error"]["code"] == "not_found"


INTERNAL = ["http://127.0.0.1:9/x", "http://[::1]/", "http://169.254.169.254/latest/meta-data", "http://localhost/",
            "http://[::ffff:10.0.0.1]/", "http://100.64.0.1/", "ftp://x.test/"]


def test_internal_urls_are_refused_at_creation(api: Callable[..., Any]) -> None:
    client = api()  # one tenant for all cases: creating tenants is the slow part of these tests
    for url in INTERNAL:
        answer = client.post("/api/v1/targets", json={**HOOK, "url": url})
        assert answer.status_code == 422 and answer.json()["error"]["code"] == "validation_error", url
    assert client.get("/api/v1/targets").json() == []


def test_internal_urls_are_refused_on_change_too(api: Callable[..., Any]) -> None:
    client = api()
    made = client.post("/api/v1/targets", json=HOOK).json()
    answer = client.patch(f"/api/v1/targets/{made['id']}", json={"url": "http://10.0.0.1/"})
    assert answer.status_code == 422


BAD = [
    {"topics": []}, {"topics": ["bad topic"]}, {"recipients": ["not-an-address"]},
    {"body_template": "{% for %}"}, {"subject_template": "x" * 2000}, {"extra": 1},
    {"kind": "webhook", "recipients": ["a@b.test"], "url": "https://93.184.216.34/"},
]


def test_bad_targets_are_refused(api: Callable[..., Any]) -> None:
    client = api()
    for change in BAD:
        answer = client.post("/api/v1/targets", json={**MAIL, **change})
        assert answer.status_code == 422, (change, answer.text)


def test_only_admins_see_targets(api: Callable[..., Any]) -> None:
    assert api(role="editor").get("/api/v1/targets").status_code == 403
    assert api(role="viewer").post("/api/v1/targets", json=HOOK).status_code == 403


def test_another_tenants_target_is_not_found(api: Callable[..., Any]) -> None:
    made = api().post("/api/v1/targets", json=HOOK).json()
    other = api()
    assert other.get(f"/api/v1/targets/{made['id']}").status_code == 404
    assert other.delete(f"/api/v1/targets/{made['id']}").status_code == 404
