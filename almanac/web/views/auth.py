"""Sign in, choose a tenant, sign out."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response

from almanac.errors import NotFound, RateLimited, Unauthorized
from almanac.tenants.auth import authenticate_password, principal_for_member
from almanac.tenants.throttle import SignInThrottle
from almanac.tenants.people import memberships_of
from almanac.web.views.common import (
    TENANT_KEY, USER_KEY, ServicesDep, flash, page_router, redirect, render, start_session,
)

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
