"""Ids that cannot name a row answer the same on both backends (SPEC sections 3 and 4).

The store's ids are INTEGER keys: 32 bits on PostgreSQL, where a larger number in a comparison is
an error, not a miss. Whatever the number, a path id that names no row is `404 not_found`; a
cursor, a filter or a body id out of range is `422 validation_error`; nothing answers 5xx.
"""

from __future__ import annotations

import re
from typing import Any

from almanac.platform.service import resources as service
from almanac.tenants import audit as audit_log
from tests.support.routes import api_routes

# Just past 32 bits, and the largest 64-bit number (past 64 bits: test_hostile_input's BAD_ID_PATHS).
TOO_BIG = ["2147483648", "9223372036854775807"]
INT_PARAM = re.compile(r"\{(\w+_id|version)\}")


def _is_error(answer: Any, status: int, code: str, what: Any) -> None:
    assert answer.status_code == status, (what, answer.status_code, answer.text)
    assert answer.json()["error"]["code"] == code, (what, answer.text)


def _id_routes(app: Any) -> list[tuple[str, str]]:
    found = [(method, path) for path, route in api_routes(app) if path.startswith("/api/v1/")
             for method in sorted(route.methods) if INT_PARAM.search(path)]
    assert len(found) > 20  # every route with an id in its path
    return found


def test_every_id_in_a_path_that_names_no_row_is_not_found(api: Any, app: Any) -> None:
    admin = api("admin")
    sid = admin.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;"}).json()["id"]
    for method, path in _id_routes(app):
        for big in TOO_BIG:
            # Each integer parameter too big in turn, the others naming a real script (and version).
            for name in INT_PARAM.findall(path):
                url = path.format(**{**{n: 1 for n in INT_PARAM.findall(path)}, "script_id": sid, name: big})
                body = {} if method in ("POST", "PUT", "PATCH") else None
                _is_error(admin.request(method, url, json=body), 404, "not_found", (method, url))


def test_cursors_and_filters_out_of_range_are_validation_errors(api: Any) -> None:
    admin = api("admin")
    for big in (2**31, 2**62):
        for url in (f"/api/v1/runs?cursor={service.encode_cursor(big)}",
                    f"/api/v1/audit?cursor={audit_log.encode_cursor(big)}",
                    f"/api/v1/runs?schedule_id={big}", f"/api/v1/deliveries?cursor={big}",
                    f"/api/v1/deliveries?target_id={big}", f"/api/v1/deliveries?event_id={big}"):
            _is_error(admin.get(url), 422, "validation_error", url)
    # The largest id is still an id: it names no row, so the pages are empty.
    assert admin.get(f"/api/v1/runs?cursor={service.encode_cursor(2**31 - 1)}").json()["items"] == []
    assert admin.get(f"/api/v1/runs?schedule_id={2**31 - 1}").json()["items"] == []


def test_body_ids_out_of_range_are_validation_errors(api: Any) -> None:
    admin = api("admin")
    sid = admin.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;"}).json()["id"]
    sch = admin.post("/api/v1/schedules", json={"name": "n", "script_id": sid, "rule": "@daily"}).json()
    for big in (2**31, 2**62):
        job = {"key": "j", "script_id": big, "run_at": "2030-01-01T00:00:00Z"}
        schedule = {"name": "n", "script_id": big, "rule": "@daily"}
        for method, url, body in (("POST", "/api/v1/schedules", schedule),
                                  ("POST", "/api/v1/schedules/batch", {"schedules": [schedule]}),
                                  ("PATCH", f"/api/v1/schedules/{sch['id']}", {"script_id": big}),
                                  ("PUT", "/api/v1/jobs/j", {k: v for k, v in job.items() if k != "key"}),
                                  ("POST", "/api/v1/jobs/batch", {"jobs": [job]})):
            _is_error(admin.request(method, url, json=body), 422, "validation_error", (method, url, big))
    assert admin.get("/api/v1/jobs/j").status_code == 404
    assert [s["id"] for s in admin.get("/api/v1/schedules").json()] == [sch["id"]]


def test_pages_with_ids_past_32_bits(app: Any, make_tenant: Any) -> None:
    from tests.integration.web_views.conftest import Browser

    tenant = make_tenant()
    b = Browser(app)
    assert b.login(f"admin@{tenant}.test").status_code == 303
    b.client.raise_server_exceptions = False
    for path in ("/schedules/2147483648", "/runs/2147483648", "/scripts/2147483648", "/targets/2147483648",
                 "/deliveries/2147483648", "/events/2147483648", "/scripts/2147483648/versions"):
        assert b.get(path).status_code == 404, path
    for path in ("/runs?schedule_id=2147483648", f"/runs?cursor={service.encode_cursor(2**31)}",
                 "/deliveries?cursor=2147483648", "/deliveries?target_id=2147483648",
                 "/deliveries?event=2147483648"):
        assert b.get(path).status_code in (404, 422), path
