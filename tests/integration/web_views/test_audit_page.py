"""The audit page (admin only) and the pages' changes being recorded with the person who made them."""

from __future__ import annotations

import inspect

from tests.support.routes import api_routes

# Pages that change no tenant's data: signing in and out, choosing a tenant, one's own password.
NOT_TENANT_CHANGES = {"/login", "/logout", "/tenants", "/account/password",
                      "/scripts/check"}  # computes an answer (a syntax check), changes nothing


def test_every_changing_page_route_records_an_entry(app):
    silent = []
    for path, route in api_routes(app):
        if "POST" in route.methods and not path.startswith("/api/") and path not in NOT_TENANT_CHANGES:
            source = inspect.getsource(route.endpoint)
            # run_now.run_and_wait writes the audit entry it is given (audit_entry=...)
            if not any(call in source for call in ("audit(", "audit.record(", "_act(", "scripts_api.run_script(",
                                                   "run_now.run_and_wait(")):
                silent.append(path)
    assert silent == []


def test_the_audit_page_shows_who_did_what_escaped_and_filters(signed_in):
    b = signed_in("admin")
    evil = '<img src=x onerror="alert(1)">'
    assert b.post("/tokens", {"name": evil, "role": "viewer"}).status_code == 201
    assert b.post("/members", {"email": "friend@example.com", "role": "editor"}).status_code == 201
    page = b.get("/audit")
    assert page.status_code == 200 and '<a href="/audit" aria-current="page">Audit</a>' in page.text
    email = f"admin@{b.tenant}.test"
    assert page.text.count(email) >= 3 and "testclient" in page.text  # nav + 2 entries
    assert "invitation.create" in page.text and "token.create" in page.text
    assert evil not in page.text and "&lt;img src=x onerror=" in page.text
    assert "invitation.create" not in b.get("/audit", params={"actor": "someone@else.test"}).text
    assert "token.create" in b.get("/audit", params={"actor": email, "since": "2000-01-01T00:00"}).text
    bad = b.get("/audit", params={"since": "yesterday"})
    assert bad.status_code == 422 and 'role="alert"' in bad.text
    assert '<label for="audit-since">Since</label>' in page.text and '<label for="audit-actor">Actor</label>' in page.text
    editor = signed_in("editor", tenant=b.tenant)  # admins only
    assert editor.get("/audit").status_code == 403 and 'href="/audit"' not in editor.get("/schedules").text

