"""The egress allowlist and secrets pages: admin only, CSRF, values write-only, refusals in an alert."""

from __future__ import annotations

from sqlalchemy import text

from almanac.db import schema_for


def test_the_egress_page_saves_the_list_and_refuses_a_bad_entry(signed_in):
    b = signed_in("admin")
    page = b.get("/egress")
    assert page.status_code == 200 and 'href="/egress"' in page.text and "No host" in page.text
    saved = b.post("/egress", {"hosts": "api.example.com\n*.Example.org\n\nhost:8443"})
    assert saved.status_code == 303
    page = b.get("/egress").text
    assert "<code>*.example.org</code>" in page and "3 host(s)" in page
    refused = b.post("/egress", {"hosts": "api.example.com\nnot a host"})
    assert refused.status_code == 422 and 'role="alert"' in refused.text and "not a host" in refused.text
    assert "<code>api.example.com</code>" in refused.text  # the saved list is unchanged
    assert b.post("/egress", {"hosts": "x.example"}, csrf=False).status_code in (400, 403)


def test_a_secrets_value_goes_in_and_never_comes_back(signed_in, database):
    b = signed_in("admin")
    assert b.post("/secrets", {"name": "API_TOKEN", "value": "very-secret-value"}).status_code == 303
    page = b.get("/secrets").text
    assert "API_TOKEN" in page and "very-secret-value" not in page and 'type="password"' in page
    slug = b.tenant
    refused = b.post("/secrets", {"name": "lower", "value": "x"})
    assert refused.status_code == 422 and 'role="alert"' in refused.text
    too_short = b.post("/secrets", {"name": "PIN", "value": "123"})
    assert too_short.status_code == 422 and "at least 4 characters" in too_short.text
    assert b.post("/secrets/API_TOKEN/delete").status_code == 303
    assert "No secrets yet" in b.get("/secrets").text
    with database.tenant_connection(slug) as conn:
        assert conn.execute(text(f'SELECT count(*) FROM "{schema_for(slug)}".secrets')).scalar() == 0


def test_editors_cannot_see_either_page(signed_in):
    b = signed_in("editor")
    assert b.get("/egress").status_code == 403 and b.get("/secrets").status_code == 403
    assert 'href="/egress"' not in b.get("/").text
