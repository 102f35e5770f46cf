"""Request dependencies: services, the principal, the single role gate, sessions.

Every API router is made by `api_router()`, which attaches `RoleGate`: reads
need the router's `read` role, writes its `write` role. A route that needs
more than its router says adds `Depends(need("admin"))`. A meta-test walks
the app and checks that every `/api/v1` route carries the gate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from almanac import jsonsafe
from almanac.errors import Forbidden, NotFound, Unauthorized, ValidationError
from almanac.tenants.auth import Principal, stamp_token_use, verify_token
from almanac.tenants.models import ROLES
from almanac.web.audit import bind as bind_audit
from almanac.web.token_cache import TokenCache
from almanac.worker import Services

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("Send an API token as 'Authorization: Bearer <token>'.")
    return value.strip()


def _look_up(services: Services, token: str, now: datetime) -> tuple[Principal, bool]:
    # Only reads (on SQLite a writing transaction would wait for every other tenant's writer).
    with services.db.shared_session(read_only=True) as session:
        return verify_token(session, token, now=now)


def _stamp(services: Services, principal: Principal, now: datetime) -> None:
    with services.db.shared_session() as session:
        stamp_token_use(session, principal, now)


async def get_principal(request: Request, services: ServicesDep, background: BackgroundTasks) -> Principal:
    """The tenant and role behind the request's API token (cached on the request, and for a moment
    in the app's `TokenCache`: a hit costs no database round trip and no worker thread). The token's
    last use, when due, is written after the answer, which never waits for it."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    token = _bearer(request)
    tokens: TokenCache | None = getattr(request.app.state, "token_cache", None)
    principal = tokens.get(token) if tokens is not None else None
    if principal is None:
        now = services.clock.now()
        found, stale = await run_in_threadpool(_look_up, services, token, now)
        if stale:
            background.add_task(_stamp, services, found, now)
        if tokens is not None:
            tokens.put(token, found)
        principal = found
    request.state.principal = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


class RoleGate:
    """The one authorization check of the API: a role for reads, a role for writes."""

    def __init__(self, read: str, write: str) -> None:
        assert read in ROLES and write in ROLES
        self.read, self.write = read, write

    async def __call__(self, request: Request, principal: CurrentPrincipal) -> Principal:
        needed = self.read if request.method in READ_METHODS else self.write
        if not principal.has(needed):
            raise Forbidden(f"This needs the {needed} role; your token has {principal.role}.")
        return principal


def need(role: str) -> RoleGate:
    """A stricter gate for one route (the router's gate still applies too)."""
    return RoleGate(role, role)


def _id_params(route: Any) -> tuple[str, ...]:
    """The path parameters of `route` that are numbers (ids, and a script's version number)."""
    dependant = getattr(route, "dependant", None)
    names = getattr(route, "_almanac_id_params", None)
    if names is None and dependant is not None:
        names = tuple(p.name for p in dependant.path_params
                      if p.name.endswith("_id") or p.field_info.annotation is int)
        route._almanac_id_params = names  # worked out once a route, not once a request
    return names or ()


async def valid_ids(request: Request) -> None:
    """SPEC section 3: a number in a path that is not a valid id at all (not digits, past `jsonsafe.ID_MAX`,
    the largest key the store can hold) names nothing: 404, on both backends alike.

    Checked here, before FastAPI's own validation could call them 422 and before PostgreSQL could
    refuse a number wider than its `integer` column.
    """
    for name in _id_params(request.scope.get("route")):
        value = str(request.path_params.get(name, ""))
        if jsonsafe.parse_id(value) is None:
            thing = name[:-3] if name.endswith("_id") else name
            raise NotFound(f"There is no {thing.replace('_', ' ')} {value[:40]!r}.")


async def safe_params(request: Request) -> None:
    """Text in the path and the query string follows the body's rule (`jsonsafe.check_text`): no U+0000
    (which PostgreSQL cannot hold or compare). Starlette has already turned bytes that are not UTF-8,
    lone surrogates among them, into U+FFFD."""
    given = [("path", name, str(value)) for name, value in request.path_params.items()]
    given += [("query", name, value) for name, value in request.query_params.multi_items()]
    for where, name, value in given:
        try:
            jsonsafe.check_text(name, f"a {where} parameter's name")
            jsonsafe.check_text(value, f"{name[:40]} in the {where}")
        except jsonsafe.Unsafe as exc:
            raise ValidationError(f"{exc}.", details={"field": name[:40]}) from None


async def safe_body(request: Request) -> None:
    """Every JSON body is checked once, here, by `almanac.jsonsafe`: no lone surrogates, at most 64 levels
    deep, integers within 64 bits. (Bodies that are not JSON are left to the route's own validation.)"""
    content_type = request.headers.get("content-type")
    if request.method in READ_METHODS or (content_type is not None and "json" not in content_type):
        return  # a body without a content type is checked too, in case it is ever read as JSON
    raw = await request.body()  # cached: the route reads the same bytes
    if not raw:
        return
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return  # FastAPI answers it (see web.errors)
    try:
        jsonsafe.check(value, "the body")
    except jsonsafe.Unsafe as exc:
        raise ValidationError(f"{exc}.", details={"field": "body"}) from None


def api_router(*, prefix: str, tags: list[str], read: str = "viewer", write: str = "editor") -> APIRouter:
    gates = [Depends(RoleGate(read, write)), Depends(valid_ids), Depends(safe_params), Depends(safe_body)]
    router = APIRouter(prefix=prefix, tags=tags, dependencies=gates)
    router.role_gate = (read, write)  # type: ignore[attr-defined]  (read by the route meta-test)
    return router


def get_tenant_session(request: Request, principal: CurrentPrincipal, services: ServicesDep) -> Iterator[Session]:
    """One unit of work per request in the principal's tenant schema: commit after the handler."""
    # A GET only reads: on SQLite it then waits for no writer, another tenant's included.
    read_only = request.method in ("GET", "HEAD")
    with services.db.tenant_session(principal.tenant_slug, read_only=read_only) as session:
        yield bind_audit(session, request)  # audit entries join this unit of work


def get_shared_session(request: Request, services: ServicesDep) -> Iterator[Session]:
    with services.db.shared_session() as session:
        yield bind_audit(session, request)


TenantSession = Annotated[Session, Depends(get_tenant_session, scope="function")]
SharedSession = Annotated[Session, Depends(get_shared_session, scope="function")]
