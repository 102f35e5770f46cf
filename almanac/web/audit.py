"""One call per changing route: `audit(session, "schedule.update", "schedule 7", changes)`.

The entry joins the route's own unit of work (the session it changes), so it commits or rolls
back with the change. Who, from where and when come from the request: API sessions carry it in
`session.info` (set by the session dependencies in deps.py); pages pass `request=`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session

from almanac.tenants import audit as core
from almanac.tenants.auth import Principal

REQUEST_KEY = "almanac.request"


def bind(session: Session, request: Request) -> Session:
    """Remember the request a session serves, for `audit` (called by the session dependencies)."""
    session.info[REQUEST_KEY] = request
    return session


def audit(session: Session, action: str, target: str | None = None, changes: Any = None, *,
          request: Request | None = None, redact: tuple[str, ...] = ()) -> None:
    request = request or session.info.get(REQUEST_KEY)
    if request is None:
        raise RuntimeError("audit() needs the request: pass request= or use a session from deps")
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise RuntimeError("audit() outside a signed-in request")
    core.record(session, principal.tenant_id, actor_of(request, principal), action, target=target,
                changes=changes, redact=redact, now=request.app.state.services.clock.now())


def actor_of(request: Request, principal: Principal) -> core.Actor:
    kind, name, actor_id = principal.actor
    return core.Actor(kind, name, actor_id, request.client.host if request.client else None)
