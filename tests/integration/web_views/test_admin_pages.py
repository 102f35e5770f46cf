"""Tokens and members pages: admin only, shown once, revoke, roles."""

from __future__ import annotations

import re

from almanac.tenants import auth, people, registry


def test_token_is_shown_once_listed_and_revoked(signed_in, database, now):
    b = signed_in("admin")
    created = b.post("/tokens", {"name": "deploy bot", "role": "editor"})
    assert created.status_code == 201
    token = re.search(r'id="new-token">([^<]+)<', created.text).group(1)
    assert token.startswith("alm_")
    listing = b.get("/tokens").text
    assert "deploy bot" in listing and token not in listing and "never" in listing
    with database.shared_session() as session:
        auth.authenticate_token(session, token, now=now)
    assert "never" not in b.get("/tokens").text.split("deploy bot")[1].split("</tr>")[0]
    token_id = re.search(r'action="/tokens/(\d+)/revoke"', listing).group(1)
    revoked = b.post(f"/tokens/{token_id}/revoke")
    assert revoked.status_code == 303
    page = b.get("/tokens").text
    assert "revoked" in page and "Revoke deploy bot" not in page
    with database.shared_session() as session:
        try:
            auth.authenticate_token(session, token, now=now)
            raise AssertionError("revoked token still works")
        except Exception as exc:  # noqa: BLE001 - Unauthorized is the point
            assert getattr(exc, "code", "") == "unauthorized"


def test_bad_token_name_is_refused_with_an_alert(signed_in):
    b = signed_in("admin")
    response = b.post("/tokens", {"name": " ", "role": "editor"})
    assert response.status_code == 422 and 'role="alert"' in response.text


def test_another_tenants_token_is_not_found(signed_in, make_tenant, issue_token, database):
    other = make_tenant()
    issue_token(other, "admin")
    with database.shared_session() as session:
        other_id = auth.list_tokens(session, registry.get_tenant(session, other).id)[0].id
    b = signed_in("admin")
    assert b.post(f"/tokens/{other_id}/revoke").status_code == 404


def test_members_invite_change_role_remove(signed_in, database, now):
    b = signed_in("admin")
    invited = b.post("/members", {"email": "new.person@example.com", "role": "viewer"})
    assert invited.status_code == 201 and 'id="invitation-link"' in invited.text
    assert "password" not in invited.text.split("<main")[1].lower()
    with database.shared_session() as session:  # the operator's tool adds a member directly
        people.add_member(session, registry.get_tenant(session, b.tenant), "new.person@example.com", "viewer",
                          None, now=now)
    page = b.get("/members").text
    user_id = re.findall(r'action="/members/(\d+)/remove" class="inline">\s*<input[^>]*>\s*<button[^>]*Remove new.person', page)
    user_id = user_id[0] if user_id else re.findall(r'action="/members/(\d+)/remove"', page)[-1]
    assert b.post(f"/members/{user_id}/role", {"role": "editor"}).status_code == 303
    assert "new.person@example.com is now editor" in b.get("/members").text
    assert b.post(f"/members/{user_id}/remove").status_code == 303
    assert "Remove new.person@example.com" not in b.get("/members").text



def test_the_last_admin_cannot_be_demoted(signed_in):
    b = signed_in("admin")
    page = b.get("/members").text
    (user_id,) = re.findall(r'action="/members/(\d+)/remove"', page)
    response = b.post(f"/members/{user_id}/role", {"role": "viewer"})
    assert response.status_code == 409 and "at least one admin" in response.text


def test_admin_pages_refuse_editors_and_viewers(signed_in):
    for role in ("editor", "viewer"):
        b = signed_in(role)
        assert b.get("/tokens").status_code == 403
        assert b.get("/members").status_code == 403
        assert b.post("/tokens", {"name": "x", "role": "admin"}).status_code == 403
        nav = b.get("/").text
        assert 'href="/tokens"' not in nav and 'href="/scripts"' not in nav
