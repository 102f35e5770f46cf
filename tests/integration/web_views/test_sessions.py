"""sessions live on the server; sign-out and password changes end them."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.web_views.conftest import PASSWORD, Browser

COOKIE = "almanac_session"


def _copy(app, b: Browser) -> TestClient:
    thief = TestClient(app, follow_redirects=False)
    thief.cookies.set(COOKIE, b.client.cookies.get(COOKIE))
    return thief


def test_a_cookie_copied_before_sign_out_stops_working(app, signed_in):
    b = signed_in("admin")
    thief = _copy(app, b)
    assert thief.get("/schedules").status_code == 200  # the copy works while the session lives
    assert b.post("/logout").status_code == 303
    after = thief.get("/schedules")
    assert after.status_code == 303 and after.headers["location"].startswith("/login")


def test_changing_ones_password_ends_the_other_sessions_but_not_this_one(app, signed_in, browser):
    b = signed_in("admin")
    email = f"admin@{b.tenant}.test"
    other = browser()
    assert other.login(email).status_code == 303
    thief = _copy(app, b)  # a copy of b's cookie is b's own session: it stays, as b does
    page = b.get("/account/password")
    assert '<label for="new-password">New password</label>' in page.text
    wrong = b.post("/account/password", {"current_password": "not-it-at-all", "new_password": "a-new-password-42"})
    assert wrong.status_code == 422 and 'role="alert"' in wrong.text
    assert other.get("/schedules").status_code == 200  # a refused change ends nothing
    done = b.post("/account/password", {"current_password": PASSWORD, "new_password": "a-new-password-42"})
    assert done.status_code == 200 and "signed out" in done.text
    assert b.get("/schedules").status_code == 200 and thief.get("/schedules").status_code == 200
    assert other.get("/schedules").status_code == 303
    assert browser().login(email, PASSWORD).status_code == 401
    assert browser().login(email, "a-new-password-42").status_code == 303


def test_the_cookie_is_only_a_random_id_renewed_at_sign_in_and_expiring(app, signed_in, browser, manual_clock,
                                                                       database):
    from almanac.tenants.models import WebSession

    b = browser()
    b.get("/login")
    before = b.client.cookies.get(COOKIE)
    b2 = signed_in("admin")
    assert b.login(f"admin@{b2.tenant}.test").status_code == 303
    after = b.client.cookies.get(COOKIE)
    assert after != before and len(after) == 43 and "." not in after  # 256 random bits, no signed payload
    fixed = TestClient(app, follow_redirects=False)
    fixed.cookies.set(COOKIE, before)  # the id from before sign-in was not promoted (fixation)
    assert fixed.get("/schedules").status_code == 303
    with database.shared_session() as session:
        assert session.get(WebSession, after) is None  # only the hash is stored
    assert b.get("/schedules").status_code == 200
    manual_clock.advance(hours=12, seconds=1)
    assert b.get("/schedules").status_code == 303


def test_the_password_page_is_linked_and_needs_a_signed_in_person(signed_in, browser):
    b = signed_in("admin")
    assert '<a href="/account/password">Password</a>' in b.get("/").text
    stranger = browser()
    assert stranger.get("/account/password").headers["location"].startswith("/login")
    stranger.get("/login")
    refused = stranger.post("/account/password", {"current_password": PASSWORD, "new_password": "x" * 12})
    assert refused.status_code == 303 and refused.headers["location"] == "/login"
