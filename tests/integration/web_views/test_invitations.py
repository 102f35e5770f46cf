"""adding a person is an invitation; no tenant admin sets or learns a password."""

from __future__ import annotations

import json
import re

from almanac.tenants.models import Invitation, User
from tests.integration.web_views.conftest import PASSWORD

VICTIM = "victim@example.com"
CHOSEN = "chosen-by-admin-a-123"


def _tenant_of(b) -> str:
    return b.get("/api/v1/tenant").json()["slug"]


def test_an_admin_cannot_plant_a_password_and_sign_in_to_another_tenant(api, browser):
    """The takeover of the issue: A's admin 'adds' the victim with a password, B adds the same
    email later, and A's admin signs in as the victim into B."""
    a, b = api("admin"), api("admin")
    a.post("/api/v1/members", json={"email": VICTIM, "role": "viewer", "password": CHOSEN})
    b.post("/api/v1/members", json={"email": VICTIM, "role": "admin"})
    attacker = browser()
    attacker.login(VICTIM, CHOSEN)
    chooser = attacker.get("/tenants")
    assert b.tenant not in chooser.text  # the victim's membership in B is not reachable with A's password
    attacker.get("/login")
    attacker.post("/tenants", {"tenant": b.tenant})
    assert attacker.get("/").status_code in (303, 307)  # not signed in to B


def test_a_password_in_the_request_is_refused(api):
    a = api("admin")
    response = a.post("/api/v1/members", json={"email": VICTIM, "role": "viewer", "password": CHOSEN})
    assert response.status_code == 422 and response.json()["error"]["code"] == "validation_error"


def test_the_answer_is_the_same_for_known_and_unknown_emails(api, database):
    a = api("admin")
    known = f"admin@{api('admin').tenant}.test"  # an account that exists (admin of another tenant)
    answers = [a.post("/api/v1/members", json={"email": email, "role": "editor"})
               for email in (known, "nobody.yet@example.com")]
    assert [r.status_code for r in answers] == [201, 201]
    shapes = [{k: type(v).__name__ for k, v in r.json().items() if k not in ("email",)} for r in answers]
    assert shapes[0] == shapes[1]
    for r in answers:
        body = r.json()
        assert "password" not in r.text and "user_id" not in body
        assert re.fullmatch(r"http://testserver/invite/[A-Za-z0-9_-]{40,}", body["invitation_url"])
    with database.shared_session() as session:  # nothing was created for the unknown email
        assert session.query(User).filter_by(email="nobody.yet@example.com").count() == 0
        stored = [i.token_hash for i in session.query(Invitation).all()]
    for r in answers:  # the link's secret is stored only hashed
        secret = r.json()["invitation_url"].rsplit("/", 1)[1]
        assert secret not in stored and all(secret not in h for h in stored)


def _link_path(url: str) -> str:
    return url.replace("http://testserver", "")


def test_a_new_person_accepts_on_the_page_by_choosing_a_password(signed_in, browser):
    admin = signed_in("admin")
    invited = admin.post("/members", {"email": "Newcomer@Example.com", "role": "editor"})
    assert invited.status_code == 201
    link = re.search(r'id="invitation-link">([^<]+)<', invited.text).group(1)
    listing = admin.get("/members").text
    assert "newcomer@example.com" in listing and "pending" in listing and link not in listing
    newcomer = browser()
    page = newcomer.get(_link_path(link))
    assert page.status_code == 200 and "as <strong>editor</strong>" in page.text
    assert '<label for="password">Password</label>' in page.text and "Repeat password" in page.text
    differ = newcomer.post(_link_path(link), {"password": "my-own-password-1", "password_repeat": "other-one-123"})
    assert differ.status_code == 422 and 'role="alert"' in differ.text
    done = newcomer.post(_link_path(link), {"password": "my-own-password-1", "password_repeat": "my-own-password-1"})
    assert done.status_code == 303 and done.headers["location"] == "/"
    assert newcomer.get("/schedules").status_code == 200  # signed in, in the inviting tenant
    assert newcomer.get(_link_path(link)).status_code == 404  # one time only
    assert browser().login("newcomer@example.com", "my-own-password-1").status_code == 303
    assert "accepted" in admin.get("/members").text


def test_an_existing_account_signs_in_to_accept_and_keeps_its_password(signed_in, browser, api):
    other_admin = signed_in("admin")  # has an account (admin of their own tenant)
    email = f"admin@{other_admin.tenant}.test"
    inviter = api("admin")
    link = _link_path(inviter.post("/api/v1/members", json={"email": email, "role": "viewer"}).json()["invitation_url"])
    visitor = browser()
    page = visitor.get(link)
    assert "Sign in with your Almanac password" in page.text and "Repeat password" not in page.text
    wrong = visitor.post(link, {"password": "not-the-password"})
    assert wrong.status_code == 401 and "Wrong password" in wrong.text
    assert visitor.post(link, {"password": PASSWORD}).status_code == 303
    choices = visitor.get("/tenants").text
    assert inviter.tenant in choices and other_admin.tenant in choices


def test_signed_in_people_accept_only_their_own_invitations(signed_in, api):
    me, someone_else = signed_in("admin"), signed_in("admin")
    inviter = api("admin")
    mine = _link_path(inviter.post("/api/v1/members", json={"email": f"admin@{me.tenant}.test",
                                                             "role": "editor"}).json()["invitation_url"])
    page = me.get(mine)
    assert "Accept invitation" in page.text and 'type="password"' not in page.text
    assert someone_else.get(mine).text.count('role="alert"') == 1  # "sign out, then open it again"
    refused = someone_else.post(mine, {})
    assert refused.status_code == 422 and inviter.tenant not in someone_else.get("/tenants").text
    assert me.post(mine, {}).status_code == 303
    assert inviter.tenant in me.get("/tenants").text


def test_expired_revoked_replaced_and_made_up_links_do_not_work(api, browser, manual_clock):
    admin = api("admin")
    first = admin.post("/api/v1/members", json={"email": "late@example.com", "role": "viewer"}).json()
    second = admin.post("/api/v1/members", json={"email": "late@example.com", "role": "editor"}).json()
    other = admin.post("/api/v1/members", json={"email": "gone@example.com", "role": "viewer"}).json()
    revoked = admin.delete(f"/api/v1/invitations/{other['id']}")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    listing = {i["id"]: i for i in admin.get("/api/v1/invitations").json()}
    assert listing[first["id"]]["status"] == "revoked" and listing[second["id"]]["status"] == "pending"
    assert all(i["invitation_url"] is None for i in listing.values())
    b = browser()
    for url in (first["invitation_url"], other["invitation_url"], "http://testserver/invite/made-up"):
        response = b.get(_link_path(url))
        assert response.status_code == 404 and "not valid" in response.text
    assert b.get(_link_path(second["invitation_url"])).status_code == 200
    manual_clock.advance(days=7, seconds=1)
    assert b.get(_link_path(second["invitation_url"])).status_code == 404
    statuses = {i["id"]: i["status"] for i in admin.get("/api/v1/invitations").json()}
    assert statuses[second["id"]] == "expired" and statuses[other["id"]] == "revoked"
    assert admin.delete("/api/v1/invitations/999999").json()["error"]["code"] == "not_found"


def test_malformed_input_is_a_4xx_never_a_500(api, browser):
    a = api("admin")
    for body in ({"email": "\ud800@example.com", "role": "viewer"}, {"email": "a\u0000b@example.com", "role": "viewer"},
                 {"email": "x@example.com", "role": "owner"}, {"email": ["x"], "role": "viewer"}):
        response = a.post("/api/v1/members", content=json.dumps(body), headers={"content-type": "application/json"})
        assert response.status_code == 422 and response.json()["error"]["code"] == "validation_error", body
    bad_name = a.post("/api/v1/tokens", content=json.dumps({"name": "\udfff", "role": "viewer"}),
                      headers={"content-type": "application/json"})
    assert bad_name.status_code == 422
    for cursor in ("x" * 100, "%00", "a" * 5000):
        assert a.delete(f"/api/v1/invitations/{cursor}").status_code in (404, 422)
    b = browser()
    assert b.get("/invite/" + "x" * 5000).status_code == 404
    b.client.cookies.set("almanac_session", "\"unterminated")
    assert b.get("/login").status_code == 200
