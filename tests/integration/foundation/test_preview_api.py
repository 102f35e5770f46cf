"""The preview endpoint end to end: forms, errors in the envelope, the tenant's minimum interval."""

from __future__ import annotations

from typing import Any, Callable

import pytest

pytestmark = pytest.mark.any_backend  # no SQL here that differs between the backends


@pytest.fixture
def client(api: Callable[..., Any]) -> Any:
    return api("viewer")


def test_english_rule_previews_with_offsets(client: Any) -> None:
    # The test clock is 2026-11-21 09:00 UTC, a Saturday.
    body = client.post("/api/v1/recurrence/preview", json={"rule": "every weekday at 9am", "timezone": "Europe/Berlin", "count": 3}).json()
    assert body["input_kind"] == "text"
    assert "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR" in body["rrule"] and "TZID=Europe/Berlin" in body["rrule"]
    assert "weekday" in body["description"] and "9:00 AM" in body["description"]
    assert body["next"] == ["2026-11-23T09:00:00+01:00", "2026-11-24T09:00:00+01:00", "2026-11-25T09:00:00+01:00"]


def test_cron_and_rrule_forms(client: Any) -> None:
    cron = client.post("/api/v1/recurrence/preview", json={"rule": "0 8 * * 1-5", "timezone": "UTC", "count": 1}).json()
    assert cron["input_kind"] == "cron" and cron["next"] == ["2026-11-23T08:00:00Z"]
    rrule = client.post("/api/v1/recurrence/preview", json={"rule": "RRULE:FREQ=MONTHLY;BYDAY=-1FR", "timezone": "UTC", "start": "2026-12-01T12:00:00", "count": 2}).json()
    assert rrule["input_kind"] == "rrule"
    assert [d[:10] for d in rrule["next"]] == ["2026-12-25", "2027-01-29"]


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "never_fires"),
        ("FREQ=DAILY;UNTIL=20200101T000000Z", "never_fires"),
        ("FREQ=DAILY;INTERVAL=0", "invalid_rule"),
        ("every blue moon", "invalid_rule"),
        ("x" * 5000, "invalid_rule"),
        ("* * * * * *", "too_frequent"),
        ("every 15 seconds", "too_frequent"),
    ],
)
def test_bad_rules_answer_422_with_their_code(client: Any, rule: str, code: str) -> None:
    response = client.post("/api/v1/recurrence/preview", json={"rule": rule})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code and response.json()["error"]["message"]


def test_minimum_interval_is_the_tenants(api: Callable[..., Any], make_tenant: Callable[..., str]) -> None:
    relaxed = api("viewer", make_tenant(min_interval_seconds=10))
    assert relaxed.post("/api/v1/recurrence/preview", json={"rule": "every 15 seconds"}).status_code == 200


def test_count_and_timezone_are_validated(client: Any) -> None:
    assert client.post("/api/v1/recurrence/preview", json={"rule": "@daily", "count": 51}).json()["error"]["code"] == "validation_error"
    bad_zone = client.post("/api/v1/recurrence/preview", json={"rule": "@daily", "timezone": "Mars/Olympus"})
    assert bad_zone.status_code == 422 and bad_zone.json()["error"]["code"] == "invalid_rule"


def test_preview_lists_occurrences_moved_by_a_dst_gap(client: Any) -> None:
    body = client.post("/api/v1/recurrence/preview", json={
        "rule": "DTSTART;TZID=Europe/Berlin:20270326T023000\nRRULE:FREQ=DAILY;COUNT=3",
        "timezone": "Europe/Berlin", "count": 3}).json()
    assert body["next"] == ["2027-03-26T02:30:00+01:00", "2027-03-27T02:30:00+01:00",
                            "2027-03-28T03:30:00+02:00"]
    assert body["shifts"] == [{"scheduled": "2027-03-28T02:30:00", "runs_at": "2027-03-28T03:30:00+02:00",
                               "note": "02:30 does not exist on 28 Mar 2027: runs at 03:30"}]
    plain = client.post("/api/v1/recurrence/preview", json={"rule": "every day at 9am", "count": 2}).json()
    assert plain["shifts"] == []
