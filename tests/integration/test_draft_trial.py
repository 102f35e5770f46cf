"""The script page's "Try draft": the text in the editor runs unsaved, on the payload box's JSON, as a
trial through the one admission path (trigger `trial`, counted, recorded), and none of its effects
are applied; a draft that does not parse is answered with its line and never run. Admins only.
An empty payload box is `{}` on the script page's run, its trial, and a schedule page's trial.
On both databases: the draft replaces the saved source between the claim and the run."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from almanac.platform.store import quotas
from almanac.tenants import auth, people, registry
from almanac.web.api.schemas_scheduler import SOURCE_MAX
from tests.integration.web_views.conftest import PASSWORD, Browser
from tests.support import inprocess

# Fixtures: scripts run in this process, in place of conftest's `services` (a sandbox pool per test).
sandbox_cache = inprocess.sandbox_cache
services = inprocess.services

SAVED = 'export default async function (event) {\n  return {saved: true};\n}\n'
DRAFT = """export default async function (event) {
  console.log("drafting", event.payload.n);
  await almanac.kv.set("counter", event.payload.n);
  await almanac.emit("drafted", {n: event.payload.n});
  return {draft: true, n: event.payload.n + 1};
}
"""
THROWS = "export default async function (event) {\n  const a = 1;\n  throw new Error('draft broke');\n}\n"
BROKEN = "export default function (event) {\n  return 1 +;\n}\n"
ECHO = "export default async function (event) { return {payload: event.payload}; }"
HTMX = {"HX-Request": "true"}


def _signed_in(app: Any, services: Any, make_tenant: Any, role: str = "admin") -> tuple[Browser, TestClient, int]:
    """A page session of `role`, an admin's API client, and a saved script (version 1: SAVED)."""
    tenant = make_tenant()
    with services.db.shared_session() as session:
        token = auth.create_token(session, registry.get_tenant(session, tenant), "t", "admin",
                                  now=services.clock.now())[1]
    client = TestClient(app, raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {token}"
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": SAVED, "timeout_ms": 5000})
    assert answer.status_code == 201, answer.text
    email = f"admin@{tenant}.test"
    if role != "admin":
        email = f"{role}@{tenant}.test"
        with services.db.shared_session() as session:
            people.add_member(session, registry.get_tenant(session, tenant), email, role, PASSWORD,
                              now=services.clock.now())
    b = Browser(app)
    assert b.login(email).status_code == 303
    b.get("/")
    b.tenant = tenant  # type: ignore[attr-defined]
    return b, client, answer.json()["id"]


def _draft_form(source: str, payload: str) -> dict[str, str]:
    return {"name": "s", "source": source, "timeout_ms": "5000", "memory_mb": "32", "payload": payload}


def test_a_draft_runs_unsaved_as_a_trial_and_applies_nothing(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    page = b.get(f"/scripts/{sid}").text
    assert "Try draft (no side effects)" in page and "Run now (recorded)" in page
    assert "Runs the saved version; the run and its effects are kept" in re.sub(r"</?strong>", "", page)
    answer = b.post(f"/scripts/{sid}/try", _draft_form(DRAFT, '{"n": 41}'), headers=HTMX)
    assert answer.status_code == 200, answer.text
    html = answer.text
    assert 'id="trial-status">succeeded' in html and '"draft": true' in html and '"n": 42' in html
    assert "drafting 41" in html  # its logs
    assert re.search(r'<ul id="trial-kv"><li><code>counter</code> = <code class="small">41</code>', html)
    assert re.search(r'<ul id="trial-events"><li><strong>drafted</strong>', html)
    # Nothing saved, nothing applied; one run, recorded as a trial of the saved version.
    script = client.get(f"/api/v1/scripts/{sid}").json()
    assert script["version"] == 1 and script["source"] == SAVED
    assert client.get("/api/v1/kv/counter").status_code == 404
    runs = client.get("/api/v1/runs").json()["items"]
    assert [(r["trigger"], r["status"], r["output"]) for r in runs] == [("trial", "succeeded", {"draft": True, "n": 42})]
    assert runs[0]["events"] == []
    assert f'href="/runs/{runs[0]["id"]}"' in html
    entries = client.get("/api/v1/audit").json()["items"]
    tried = [e for e in entries if e["action"] == "script.try"]
    assert len(tried) == 1 and tried[0]["changes"]["payload"] == {"n": 41}
    assert tried[0]["changes"]["source_chars"] == len(DRAFT)


def test_a_draft_that_throws_shows_its_error_at_its_line(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    html = b.post(f"/scripts/{sid}/try", _draft_form(THROWS, "{}"), headers=HTMX).text
    assert 'id="trial-status">failed' in html and re.search(r'role="alert">Line 3: .*draft broke', html)


def test_a_draft_that_does_not_parse_is_answered_and_not_run(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    answer = b.post(f"/scripts/{sid}/try", _draft_form(BROKEN, "{}"), headers=HTMX)
    assert answer.status_code == 422
    assert re.search(r'role="alert">The draft was not run\. Line 2, column \d+: ', answer.text)
    # Without JavaScript: the whole page, the draft still in the editor, the answer in the result panel.
    full = b.post(f"/scripts/{sid}/try", _draft_form(BROKEN, "{}"))
    assert full.status_code == 422 and "return 1 +;" in full.text
    panel = full.text[full.text.index('id="run-result"'):]
    assert "The draft was not run. Line 2" in panel[:panel.index("</section>")]
    too_big = b.post(f"/scripts/{sid}/try", _draft_form("// " + "x" * SOURCE_MAX + "\n" + SAVED, "{}"), headers=HTMX)
    assert too_big.status_code == 422 and 'role="alert">Source: ' in too_big.text
    bad_payload = b.post(f"/scripts/{sid}/try", _draft_form(SAVED, "{oops"), headers=HTMX)
    assert bad_payload.status_code == 422 and "Payload is not JSON" in bad_payload.text
    assert client.get("/api/v1/runs").json()["items"] == []
    assert client.get(f"/api/v1/scripts/{sid}").json()["source"] == SAVED


def test_a_draft_trial_counts_against_the_daily_runs(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    with services.db.shared_session() as session:
        quotas.set_quotas(session, b.tenant, {"runs_per_day": 1}, services.clock.now())
    assert b.post(f"/scripts/{sid}/try", _draft_form(ECHO, "1"), headers=HTMX).status_code == 200
    refused = b.post(f"/scripts/{sid}/try", _draft_form(ECHO, "2"), headers=HTMX)
    assert refused.status_code == 429 and "1 runs a day" in refused.text


def test_only_admins_try_drafts_and_the_form_needs_its_csrf_token(app: Any, services: Any, make_tenant: Any) -> None:
    for role in ("editor", "viewer"):
        b, client, sid = _signed_in(app, services, make_tenant, role)
        assert b.post(f"/scripts/{sid}/try", _draft_form(ECHO, "{}"), headers=HTMX).status_code == 403
        assert client.get("/api/v1/runs").json()["items"] == []
    b, client, sid = _signed_in(app, services, make_tenant)
    forged = b.post(f"/scripts/{sid}/try", _draft_form(ECHO, "{}"), csrf=False)
    assert forged.status_code == 403
    assert client.get("/api/v1/runs").json()["items"] == []


def test_an_empty_payload_box_is_an_empty_object(app: Any, services: Any, make_tenant: Any) -> None:
    """The script page's Run now and a schedule page's trial: `{}`, so `event.payload.x` is undefined, not a TypeError."""
    b, client, sid = _signed_in(app, services, make_tenant)
    assert client.put(f"/api/v1/scripts/{sid}", json={"source": ECHO}).status_code == 200
    schedule = client.post("/api/v1/schedules", json={"name": "d", "script_id": sid, "rule": "@daily"}).json()["id"]
    for url in (f"/scripts/{sid}/run", f"/schedules/{schedule}/try"):
        answer = b.post(url, {"payload": "  "}, headers=HTMX)
        assert answer.status_code == 200, (url, answer.text)
    outputs = [(r["trigger"], r["output"]) for r in client.get("/api/v1/runs").json()["items"]]
    assert sorted(outputs) == [("manual", {"payload": {}}), ("trial", {"payload": {}})]


def test_an_empty_payload_box_is_an_empty_object_for_a_draft(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    html = b.post(f"/scripts/{sid}/try", _draft_form(ECHO, ""), headers=HTMX).text
    assert 'id="trial-status">succeeded' in html
    assert [r["output"] for r in client.get("/api/v1/runs").json()["items"]] == [{"payload": {}}]


def test_hostile_drafts_and_payloads_are_refused_not_crashed_on(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _signed_in(app, services, make_tenant)
    b.client.raise_server_exceptions = False
    cases = [
        (sid, _draft_form("export default () => '\x00';", "{}")),
        (sid, _draft_form(ECHO, '{"a": "\x00"}')),
        (sid, _draft_form(ECHO, "[" * 5000 + "]" * 5000)),
        (sid, _draft_form(ECHO, '{"big": "' + "x" * 300_000 + '"}')),
        (sid, _draft_form("", "{}")),
        (999_999, _draft_form(ECHO, "{}")),
    ]
    for script_id, form in cases:
        answer = b.post(f"/scripts/{script_id}/try", form, headers=HTMX)
        assert 400 <= answer.status_code < 500, (script_id, form["source"][:20], form["payload"][:20], answer.text[:300])
    raw = b.client.post(f"/scripts/{sid}/try", content=b"csrf_token=" + b.csrf.encode() + b"&source=%FF%FE&payload=%FF",
                        headers={**HTMX, "Content-Type": "application/x-www-form-urlencoded"})
    assert 400 <= raw.status_code < 500, raw.text[:300]  # not UTF-8
    schedule = client.post("/api/v1/schedules", json={"name": "d", "script_id": sid, "rule": "@daily"}).json()["id"]
    for url in (f"/scripts/{sid}/run", f"/schedules/{schedule}/try"):  # the other payload boxes
        deep = b.post(url, {"payload": "[" * 5000 + "]" * 5000}, headers=HTMX)
        assert deep.status_code == 422 and "nested too deeply" in deep.text, (url, deep.text[:300])
    assert client.get("/api/v1/runs").json()["items"] == []  # none of them was run
