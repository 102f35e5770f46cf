"""Tokens and members of the tenant (admin only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response

from almanac.errors import AlmanacError
from almanac.tenants import auth, people
from almanac.tenants.models import ROLES, Tenant
from almanac.web.views.common import PagePrincipal, ServicesDep, flash, page_router, redirect, render

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
            created = (row.name, row.role)
    except AlmanacError as refused:
        return _tokens_page(request, principal, services, 422, error=refused.message, name=name)
    # Shown in this answer only: it is never stored, so it is not put in the session cookie either.
    return _tokens_page(request, principal, services, 201, new_token=plaintext, created=created)


@router.post("/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with services.db.shared_session() as session:
        row = auth.revoke_token(session, principal.tenant_id, token_id, now=services.clock.now())
        name = row.name
    flash(request, f"Token “{name}” revoked; programs using it are refused from now on.")
    return redirect("/tokens")


# -- members ------------------------------------------------------------------------------


def _members_page(request: Request, principal: PagePrincipal, services: ServicesDep, status_code: int = 200,
                  **extra: object) -> Response:
    with services.db.shared_session() as session:
        members = [(m.user_id, m.user.email, m.role, m.created_at) for m in people.members_of(session, principal.tenant_id)]
    return render(request, "members.html", status_code=status_code, members=members, roles=ROLES, **extra)


@router.get("/members")
def members_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _members_page(request, principal, services)


@router.post("/members")
def add_member(request: Request, principal: PagePrincipal, services: ServicesDep,
               email: Annotated[str, Form(max_length=320)], role: Annotated[str, Form()]) -> Response:
    try:
        with services.db.shared_session() as session:
            tenant = session.get(Tenant, principal.tenant_id)
            generated = people.add_member(session, tenant, email, role, None, now=services.clock.now())
    except AlmanacError as refused:
        return _members_page(request, principal, services, 422, error=refused.message, email=email)
    return _members_page(request, principal, services, 201, added=email.strip().lower(), generated=generated)


@router.post("/members/{user_id}/role")
def change_role(request: Request, user_id: int, principal: PagePrincipal, services: ServicesDep,
                role: Annotated[str, Form()]) -> Response:
    try:
        with services.db.shared_session() as session:
            membership = people.change_role(session, principal.tenant_id, user_id, role)
            email = membership.user.email
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
            people.remove_member(session, principal.tenant_id, user_id)
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        return _members_page(request, principal, services, refused.status, error=refused.message)
    flash(request, "Member removed.")
    return redirect("/members")
