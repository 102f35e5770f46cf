"""`GET /api/v1/jobs?status=&root_key=&cursor=` (SPEC section 8): newest first, in pages with a cursor."""

from __future__ import annotations

from typing import Any

from almanac.platform.store.models import Job
from almanac.platform.service.resources import encode_cursor
from tests.integration.platform.test_job_keys import RUN_AT, _script


def _put(client: Any, sid: int, keys: list[str]) -> None:
    answer = client.post("/api/v1/jobs/batch", json={"jobs": [
        {"key": key, "script_id": sid, "run_at": RUN_AT} for key in keys]})
    assert answer.status_code == 200, answer.text


def _all(client: Any, query: str = "", limit: int = 2) -> list[str]:
    page = client.get(f"/api/v1/jobs?limit={limit}{query}")
    assert page.status_code == 200, page.text
    keys = [job["key"] for job in page.json()["items"]]
    while page.json()["next_cursor"]:
        assert len(page.json()["items"]) == limit
        page = client.get(f"/api/v1/jobs?limit={limit}{query}&cursor={page.json()['next_cursor']}")
        keys += [job["key"] for job in page.json()["items"]]
    return keys


def test_jobs_are_listed_newest_first_in_pages(api: Any, services: Any) -> None:
    client = api("viewer")
    editor = api("editor", tenant=client.tenant)
    sid = _script(services, client.tenant)
    _put(editor, sid, ["a", "b", "c", "d", "e"])
    assert _all(client) == ["e", "d", "c", "b", "a"]
    first = client.get("/api/v1/jobs").json()
    assert first["next_cursor"] is None and len(first["items"]) == 5
    item = first["items"][0]
    assert (item["state"], item["root_key"], item["depth"]) == ("pending", "e", 0)
    assert item["next_run_at"] == item["run_at"] and item["run_at"].startswith("2030-01-01T09:00:00")
    # Replacing a job does not move it: a program paging through sees each job once.
    assert editor.put("/api/v1/jobs/a", json={"script_id": sid, "run_at": "2031-01-01T00:00:00Z"}).status_code == 200
    assert _all(client) == ["e", "d", "c", "b", "a"]


def test_filters_by_state_and_chain(api: Any, services: Any) -> None:
    client = api("editor")
    sid = _script(services, client.tenant)
    _put(client, sid, ["root", "other", "gone"])
    with services.db.tenant_session(client.tenant) as s:
        s.query(Job).filter(Job.key == "other").update({"root_key": "root", "depth": 1})
    client.delete("/api/v1/jobs/gone")
    assert _all(client, "&status=pending") == ["other", "root"]
    assert _all(client, "&status=cancelled") == ["gone"]
    assert _all(client, "&root_key=root") == ["other", "root"]
    assert _all(client, "&root_key=root&status=cancelled") == []
    assert client.get("/api/v1/jobs?root_key=nothing").json() == {"items": [], "next_cursor": None}
    # SPEC's own form, `?status=&root_key=&cursor=`, with nothing filled in: no filter.
    assert _all(client, "&status=&root_key=&cursor=", limit=10) == ["gone", "other", "root"]


def test_bad_filters_and_cursors_are_422(api: Any, services: Any) -> None:
    client = api("viewer")
    for query in ("status=running", "status=done,pending", "cursor=garbage", "limit=0", "limit=201", f"cursor={encode_cursor(5)}",
                  "root_key=" + "x" * 201):
        answer = client.get(f"/api/v1/jobs?{query}")
        assert answer.status_code == 422 and answer.json()["error"]["code"] == "validation_error", query


def test_a_tenant_lists_only_its_own_jobs(api: Any, services: Any) -> None:
    mine, theirs = api("admin"), api("admin")
    _put(theirs, _script(services, theirs.tenant), ["theirs"])
    assert mine.get("/api/v1/jobs").json() == {"items": [], "next_cursor": None}
    assert mine.get("/api/v1/jobs?root_key=theirs").json()["items"] == []
    assert [job["key"] for job in theirs.get("/api/v1/jobs").json()["items"]] == ["theirs"]


def test_the_list_is_declared_in_openapi_with_every_status(app: Any) -> None:
    operation = app.openapi()["paths"]["/api/v1/jobs"]["get"]
    assert {"200", "401", "403", "422"} <= set(operation["responses"])
    assert {p["name"] for p in operation["parameters"]} == {"status", "root_key", "limit", "cursor"}
