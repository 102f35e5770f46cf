"""Sign in, choose a tenant, sign out, accept an invitation, change one's password."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from almanac.errors import AlmanacError, NotFound, RateLimited, Unauthorized, ValidationError
from almanac.tenants import audit, invitations, sessions
from almanac.tenants.models import User
from almanac.tenants.auth import authenticate_password, principal_for_member
from almanac.tenants.people import change_password, memberships_of
from almanac.tenants.throttle import SignInThrottle
from almanac.web.views.common import (
    TENANT_KEY, USER_KEY, ServicesDep, flash, page_router, redirect, render, session_principal, start_session,
)
from almanac.web.views.session_store import current_id_hash

# These pages are for people who are not (fully) signed in yet: the gate checks only CSRF on writes.
router = page_router(read=None, write=None)


def _throttle(request: Request) -> SignInThrottle:
    """One sign-in throttle per app (per process), made on first use."""
    throttle = getattr(request.app.state, "signin_throttle", None)
    if throttle is None:
        throttle = request.app.state.signin_throttle = SignInThrottle()
    return throttle


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never `//host` or `https://…`, so sign-in cannot redirect elsewhere."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    if request.session.get(USER_KEY) and request.session.get(TENANT_KEY):
        return redirect(_safe_next(next))
    return render(request, "login.html", next=_safe_next(next), email="", error=None)


@router.post("/login")
def login(
    request: Request,
    services: ServicesDep,
    email: Annotated[str, Form(max_length=320)],
    password: Annotated[str, Form(max_length=256)],
    next: Annotated[str, Form()] = "/",
) -> Response:
    throttle = _throttle(request)
    keys = [f"email:{email.strip().lower()}", f"addr:{request.client.host if request.client else '-'}"]
    now = services.clock.now()
    try:
        throttle.check(keys, now)
    except RateLimited as limited:
        return render(request, "login.html", status_code=429, next=_safe_next(next), email=email,
                      error=limited.message)
    with services.db.shared_session() as session:
        try:
            user = authenticate_password(session, email, password)
        except Unauthorized as refused:
            throttle.failed(keys, now)
            return render(request, "login.html", status_code=401, next=_safe_next(next), email=email,
                          error=refused.message)
    throttle.succeeded(keys[0])
    with services.db.shared_session() as session:
        slugs = [m.tenant.slug for m in memberships_of(session, user.id)]
    if not slugs:
        return render(request, "login.html", status_code=403, next="/", email=email,
                      error="Your account belongs to no tenant yet; ask an admin to add you.")
    start_session(request, user.id, slugs[0] if len(slugs) == 1 else None)
    return redirect(_safe_next(next) if len(slugs) == 1 else "/tenants")


@router.get("/tenants")
def choose_tenant_page(request: Request, services: ServicesDep) -> Response:
    user_id = request.session.get(USER_KEY)
    if not user_id:
        return redirect("/login")
    with services.db.shared_session() as session:
        memberships = [(m.tenant.slug, m.tenant.name, m.role) for m in memberships_of(session, int(user_id))]
    return render(request, "tenants.html", memberships=memberships, current=request.session.get(TENANT_KEY))


@router.post("/tenants")
def choose_tenant(request: Request, services: ServicesDep, tenant: Annotated[str, Form(max_length=40)]) -> Response:
    user_id = request.session.get(USER_KEY)
    if not user_id:
        return redirect("/login")
    with services.db.shared_session() as session:
        try:
            principal = principal_for_member(session, int(user_id), tenant)
        except Unauthorized:
            raise NotFound("You are not a member of that tenant.") from None  # as if it did not exist
    request.session[TENANT_KEY] = principal.tenant_slug
    flash(request, f"You are working in {principal.tenant_name}.")
    return redirect("/")


@router.post("/logout")
def logout(request: Request) -> Response:
    request.session.clear()
    return redirect("/login")


# -- one's own password -------------------------------------------------------------------


def _signed_in_user(request: Request, services: ServicesDep) -> int | None:
    """The signed-in person's id (and the principal for the navigation when a tenant is chosen)."""
    user_id = request.session.get(USER_KEY)
    if not user_id:
        return None
    if request.session.get(TENANT_KEY):
        try:
            request.state.principal = session_principal(request, services)
        except AlmanacError:
            pass
    return int(user_id)


@router.get("/account/password")
def password_page(request: Request, services: ServicesDep) -> Response:
    if _signed_in_user(request, services) is None:
        return redirect("/login?next=/account/password")
    return render(request, "password.html", error=None, done=False)


@router.post("/account/password")
def password_change(
    request: Request,
    services: ServicesDep,
    current_password: Annotated[str, Form(max_length=256)],
    new_password: Annotated[str, Form(max_length=256)],
) -> Response:
    user_id = _signed_in_user(request, services)
    if user_id is None:
        return redirect("/login")
    try:
        with services.db.shared_session() as session:
            change_password(session, user_id, current_password, new_password)
            # Whoever else holds a session of this person (a stolen cookie, a forgotten browser) is out.
            sessions.end_users_sessions(session, user_id, keep=current_id_hash(request))
    except AlmanacError as refused:
        return render(request, "password.html", status_code=422, error=refused.message, done=False)
    return render(request, "password.html", error=None, done=True)


# -- accepting an invitation ----------------------------------------------------------------


def _invite_mode(session: Session, row: invitations.Invitation, user: User | None) -> str:
    if user is not None:
        return "accept" if user.email == row.email else "other"
    return "signin" if invitations.account_exists(session, row) else "new"


def _invite_page(request: Request, services: ServicesDep, token: str, status_code: int = 200,
                 error: str | None = None) -> Response:
    with services.db.shared_session() as session:
        row = invitations.find_valid(session, token, now=services.clock.now())
        user_id = request.session.get(USER_KEY)
        user = session.get(User, int(user_id)) if user_id else None
        context = dict(tenant_name=invitations.tenant_of(session, row).name, role=row.role, email=row.email,
                       expires_at=row.expires_at, mode=_invite_mode(session, row, user),
                       signed_in_as=user.email if user else None)
    return render(request, "invite.html", status_code=status_code, token=token, error=error, **context)


@router.get("/invite/{token}")
def invitation_page(request: Request, services: ServicesDep, token: str) -> Response:
    return _invite_page(request, services, token)


@router.post("/invite/{token}")
def accept_invitation(
    request: Request,
    services: ServicesDep,
    token: str,
    password: Annotated[str, Form(max_length=256)] = "",
    password_repeat: Annotated[str, Form(max_length=256)] = "",
) -> Response:
    now = services.clock.now()
    try:
        with services.db.shared_session() as session:
            row = invitations.find_valid(session, token, now=now)
            user = _invitee(request, session, row, password, password_repeat, now)
            invitations.accept(session, row, user, now=now)
            tenant = invitations.tenant_of(session, row)
            who = audit.Actor("person", user.email, user.id, request.client.host if request.client else None)
            audit.record(session, row.tenant_id, who, "invitation.accept", target=f"invitation {row.id}",
                         changes={"email": row.email, "role": row.role}, now=now)
            user_id, slug, name = user.id, tenant.slug, tenant.name
    except (Unauthorized, RateLimited, AlmanacError) as refused:
        if refused.status == 404:
            raise
        return _invite_page(request, services, token, refused.status, refused.message)
    start_session(request, user_id, slug)
    flash(request, f"Welcome to {name}.")
    return redirect("/")


def _invitee(request: Request, session: Session, row: invitations.Invitation, password: str, repeat: str,
             now: datetime) -> User:
    """Who accepts: the signed-in person, or the one who proves the email's password, or a new account."""
    user_id = request.session.get(USER_KEY)
    if user_id:
        user = session.get(User, int(user_id))
        if user is not None:
            return user
    if invitations.account_exists(session, row):
        throttle = _throttle(request)
        keys = [f"email:{row.email}", f"addr:{request.client.host if request.client else '-'}"]
        throttle.check(keys, now)
        try:
            user = authenticate_password(session, row.email, password)
        except Unauthorized:
            throttle.failed(keys, now)
            raise Unauthorized("Wrong password.") from None
        throttle.succeeded(keys[0])
        return user
    if password != repeat:
        raise ValidationError("The two passwords differ.")
    return invitations.accept_with_new_account(session, row, password, now=now)
