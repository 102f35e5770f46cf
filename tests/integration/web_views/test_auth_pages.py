"""Sign in and out, tenant choice, CSRF, the session cookie, and the page gate."""

from __future__ import annotations

from almanac.tenants import people, registry
from tests.integration.web_views.conftest import PASSWORD, csrf_of
from tests.support.routes import api_routes


def test_pages_send_strangers_to_login(browser, make_tenant):
    b = browser()
    response = b.get("/schedules")
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fschedules"
    assert b.get("/").headers["location"] == "/login"


def test_login_page_has_labelled_fields(browser):
    html = browser().get("/login").text
    assert '<label for="email">Email</label>' in html
    assert '<label for="password">Password</label>' in html


def test_sign_in_sets_a_signed_httponly_lax_cookie_and_sign_out_clears_it(browser, make_tenant):
    slug = make_tenant()
    b = browser()
    response = b.login(f"admin@{slug}.test")
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "almanac_session=" in cookie and "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    page = b.get("/")
    assert page.status_code == 200 and slug.title() in page.text
    out = b.post("/logout")
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert b.get("/").status_code == 303


def test_wrong_password_is_refused_with_an_alert(browser, make_tenant):
    slug = make_tenant()
    b = browser()
    response = b.login(f"admin@{slug}.test", "wrong-password-123")
    assert response.status_code == 401
    assert 'role="alert"' in response.text and "Wrong email or password" in response.text
    assert b.get("/").status_code == 303


def test_sign_in_rotates_the_csrf_token(browser, make_tenant):
    slug = make_tenant()
    b = browser()
    before = csrf_of(b.get("/login").text)
    b.login(f"admin@{slug}.test")
    assert b.csrf and b.csrf != before


def test_login_redirects_only_within_the_site(browser, make_tenant):
    slug = make_tenant()
    b = browser()
    b.get("/login")
    response = b.post("/login", {"email": f"admin@{slug}.test", "password": PASSWORD, "next": "//evil.example/x"})
    assert response.headers["location"] == "/"
    b2 = browser()
    b2.get("/login?next=/runs")
    response = b2.post("/login", {"email": f"admin@{slug}.test", "password": PASSWORD, "next": "/runs"})
    assert response.headers["location"] == "/runs"


def test_a_post_without_the_csrf_token_is_refused(browser, make_tenant):
    slug = make_tenant()
    b = browser()
    b.get("/login")
    response = b.post("/login", {"email": f"admin@{slug}.test", "password": PASSWORD}, csrf=False)
    assert response.status_code == 403 and 'role="alert"' in response.text
    forged = b.post("/login", {"email": f"admin@{slug}.test", "password": PASSWORD, "csrf_token": "forged"})
    assert forged.status_code == 403


def test_a_person_with_several_tenants_chooses_one(browser, make_tenant, database, now):
    first, second = make_tenant("alpha"), make_tenant("beta")
    with database.shared_session() as session:
        people.add_member(session, registry.get_tenant(session, second), f"admin@{first}.test", "viewer", None, now=now)
    b = browser()
    response = b.login(f"admin@{first}.test")
    assert response.headers["location"] == "/tenants"
    assert b.get("/").headers["location"] == "/tenants"
    page = b.get("/tenants").text
    assert "Alpha" in page and "Beta" in page
    chosen = b.post("/tenants", {"tenant": "beta"})
    assert chosen.status_code == 303
    home = b.get("/")
    assert home.status_code == 200 and "Beta" in home.text and "viewer" in home.text
    assert b.post("/tenants", {"tenant": "gamma"}).status_code == 404


def test_removed_member_loses_the_pages(signed_in, database):
    b = signed_in("editor")
    with database.shared_session() as session:
        tenant = registry.get_tenant(session, b.tenant)
        user = people.find_user(session, f"editor@{b.tenant}.test")
        people.remove_member(session, tenant.id, user.id)
    assert b.get("/").headers["location"] == "/tenants"


def test_static_files_and_security_headers(browser):
    b = browser()
    assert b.get("/static/htmx.min.js").status_code == 200
    assert "text/css" in b.get("/static/style.css").headers["content-type"]
    csp = b.get("/login").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


def test_unknown_page_is_a_page_and_api_stays_json(signed_in):
    b = signed_in()
    page = b.get("/no-such-page")
    assert page.status_code == 404 and "text/html" in page.headers["content-type"]
    api = b.get("/api/v1/no-such")
    assert api.status_code in (401, 404) and api.json()["error"]["code"]


def test_every_page_route_carries_the_page_gate(app):
    from almanac.web.views.common import PageGate

    pages = [r for path, r in api_routes(app) if not path.startswith(("/api/", "/healthz", "/readyz", "/metrics"))]
    assert pages, "no page routes found"
    for route in pages:
        gates = [d.call for d in route.dependant.dependencies if isinstance(d.call, PageGate)]
        assert gates, f"{route.path} has no PageGate"


def test_repeated_wrong_passwords_are_rate_limited_then_allowed_after_the_window(browser, make_tenant, manual_clock):
    slug = make_tenant()
    b = browser()
    for _ in range(10):
        assert b.login(f"admin@{slug}.test", "wrong-password-123").status_code == 401
    limited = b.login(f"admin@{slug}.test")  # even the right password waits
    assert limited.status_code == 429 and 'role="alert"' in limited.text and "Too many failed sign-ins" in limited.text
    manual_clock.advance(minutes=16)
    assert b.login(f"admin@{slug}.test").status_code == 303
