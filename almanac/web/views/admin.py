"""Tokens, members, invitations and the audit log of the tenant (admin only)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Form, Query, Request
from fastapi.responses import Response

from almanac.errors import AlmanacError, ValidationError
from almanac.tenants import audit as audit_log
from almanac.tenants import auth, invitations, people
from almanac.tenants.models import ROLES, Tenant
from almanac.web.api.members import invitation_url
from almanac.web.audit import audit
from almanac.web.views.common import (
    PagePrincipal, ServicesDep, flash, page_router, redirect, render, viewer_zone,
)

router = page_router(read="admin", write="admin")


# -- tokens -------------------------------------------------------------------------------


def _tokens_page(request: Request, principal: PagePrincipal, services: ServicesDep, status_code: int = 200,
                 **extra: object) -> Response:
    with services.db.shared_session() as session:
        tokens = auth.list_tokens(session, principal.tenant_id)
    return render(request, "tokens.html", status_code=status_code, tokens=tokens, roles=ROLES, **extra)


@router.get("/tokens")
def tokens_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _tokens_page(request, principal, services)


@router.post("/tokens")
def create_token(request: Request, principal: PagePrincipal, services: ServicesDep,
                 name: Annotated[str, Form(max_length=200)], role: Annotated[str, Form()]) -> Response:
    try:
        with services.db.shared_session() as session:
            tenant = session.get(Tenant, principal.tenant_id)
            row, plaintext = auth.create_token(session, tenant, name, role, now=services.clock.now())
            audit(session, "token.create", f"token {row.name}", {"name": row.name, "role": row.role}, request=request)
            created = (row.name, row.role)
    except AlmanacError as refused:
        return _tokens_page(request, principal, services, 422, error=refused.message, name=name)
    # Shown in this answer only: it is never stored, so it is not put in the session cookie either.
    return _tokens_page(request, principal, services, 201, new_token=plaintext, created=created)


@router.post("/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with services.db.shared_session() as session:
        row = auth.revoke_token(session, principal.tenant_id, token_id, now=services.clock.now())
        audit(session, "token.revoke", f"token {row.name}", request=request)
        name, public_id = row.name, row.public_id
        request.app.state.token_cache.forget(public_id)
    request.app.state.token_cache.forget(public_id)  # again after the commit (see web.token_cache)
    flash(request, f"Token “{name}” revoked; programs using it are refused from now on.")
    return redirect("/tokens")


# -- members ------------------------------------------------------------------------------


def _members_page(request: Request, principal: PagePrincipal, services: ServicesDep, status_code: int = 200,
                  **extra: object) -> Response:
    now = services.clock.now()
    with services.db.shared_session() as session:
        members = [(m.user_id, m.user.email, m.role, m.created_at) for m in people.members_of(session, principal.tenant_id)]
        invites = [(i.id, i.email, i.role, invitations.status(i, now), i.invited_by, i.expires_at)
                   for i in invitations.listing(session, principal.tenant_id)]
    return render(request, "members.html", status_code=status_code, members=members, roles=ROLES,
                  invitations=invites, **extra)


@router.get("/members")
def members_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _members_page(request, principal, services)


@router.post("/members")
def invite_member(request: Request, principal: PagePrincipal, services: ServicesDep,
                  email: Annotated[str, Form(max_length=320)], role: Annotated[str, Form()]) -> Response:
    """An invitation, never an account: the link is shown in this answer only (it is stored hashed)."""
    try:
        with services.db.shared_session() as session:
            row, token = invitations.create(session, principal.tenant_id, email, role,
                                            invited_by=principal.actor[1], now=services.clock.now())
            audit(session, "invitation.create", f"invitation {row.id}", {"email": row.email, "role": row.role},
                  request=request)
            invited = (row.email, row.role)
    except AlmanacError as refused:
        return _members_page(request, principal, services, 422, error=refused.message, email=email)
    return _members_page(request, principal, services, 201, invited=invited, link=invitation_url(request, token))


@router.post("/invitations/{invitation_id}/revoke")
def revoke_invitation(request: Request, invitation_id: int, principal: PagePrincipal,
                      services: ServicesDep) -> Response:
    try:
        with services.db.shared_session() as session:
            row = invitations.revoke(session, principal.tenant_id, invitation_id, now=services.clock.now())
            audit(session, "invitation.revoke", f"invitation {row.id}", {"email": row.email}, request=request)
            email = row.email
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        return _members_page(request, principal, services, refused.status, error=refused.message)
    flash(request, f"Invitation for {email} revoked; its link no longer works.")
    return redirect("/members")


@router.post("/members/{user_id}/role")
def change_role(request: Request, user_id: int, principal: PagePrincipal, services: ServicesDep,
                role: Annotated[str, Form()]) -> Response:
    try:
        with services.db.shared_session() as session:
            membership = people.change_role(session, principal.tenant_id, user_id, role)
            email = membership.user.email
            audit(session, "member.update", f"member {email}", {"role": role}, request=request)
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        return _members_page(request, principal, services, refused.status, error=refused.message)
    flash(request, f"{email} is now {role}.")
    return redirect("/members")


@router.post("/members/{user_id}/remove")
def remove_member(request: Request, user_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    try:
        with services.db.shared_session() as session:
            email = people.get_membership(session, principal.tenant_id, user_id).user.email
            people.remove_member(session, principal.tenant_id, user_id)
            audit(session, "member.delete", f"member {email}", request=request)
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        return _members_page(request, principal, services, refused.status, error=refused.message)
    flash(request, "Member removed.")
    return redirect("/members")


# -- audit log ------------------------------------------------------------------------------


def _since(value: str, zone: Any) -> datetime | None:
    """The form's `datetime-local` (the viewer's wall clock) or an ISO date-time with an offset."""
    if not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
        return (parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed).astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise ValidationError("Since: give a date and time, e.g. 2026-11-21T09:00.") from None


def _changes_text(entry: Any) -> str:
    changes = audit_log.changes_of(entry)
    return json.dumps(changes, ensure_ascii=False, sort_keys=True) if changes else ""


@router.get("/audit")
def audit_page(request: Request, principal: PagePrincipal, services: ServicesDep,
               since: Annotated[str, Query(max_length=40)] = "", actor: Annotated[str, Query(max_length=320)] = "",
               cursor: Annotated[str, Query(max_length=100)] = "") -> Response:
    error, rows, older = None, [], None
    try:
        with services.db.shared_session() as session:
            found, next_cursor = audit_log.page(session, principal.tenant_id, since=_since(since, viewer_zone(request)),
                                                actor=actor.strip() or None, cursor=cursor or None, limit=50)
            rows = [(e.at, e.actor, e.actor_kind, e.address, e.action, e.target, _changes_text(e)) for e in found]
    except ValidationError as refused:
        error = refused.message
    else:
        if next_cursor:
            older = "/audit?" + urlencode({k: v for k, v in (("since", since), ("actor", actor),
                                                              ("cursor", next_cursor)) if v})
    return render(request, "audit.html", status_code=422 if error else 200, rows=rows, since=since, actor=actor,
                  older=older, error=error)
