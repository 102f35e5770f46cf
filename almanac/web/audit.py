"""One call per changing route: `audit(session, "schedule.update", "schedule 7", changes)`.

The entry joins the route's own unit of work (the session it changes), so it commits or rolls
back with the change. Who, from where and when come from the request: API sessions carry it in
`session.info` (set by the session dependencies in deps.py); pages pass `request=`.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import Request
from sqlalchemy import Table, insert
from sqlalchemy.orm import Session

from almanac.tenants import audit as core
from almanac.tenants.auth import Principal
from almanac.tenants.models import AuditEntry

REQUEST_KEY = "almanac.request"
TABLE = cast(Table, AuditEntry.__table__)
_INSERT = insert(TABLE)  # built once (see `at_once`)


def bind(session: Session, request: Request) -> Session:
    """Remember the request a session serves, for `audit` (called by the session dependencies)."""
    session.info[REQUEST_KEY] = request
    return session


def audit(session: Session, action: str, target: str | None = None, changes: Any = None, *,
          request: Request | None = None, redact: tuple[str, ...] = (), at_once: bool = False) -> None:
    """Record the entry in the session's unit of work. `at_once`: inserted now with Core on the
    session's connection, not added to the ORM session for its flush (a hot route whose unit of work
    has no ORM objects: the single PUT); the same row, in the same transaction."""
    request = request or session.info.get(REQUEST_KEY)
    if request is None:
        raise RuntimeError("audit() needs the request: pass request= or use a session from deps")
    if at_once:
        session.connection().execute(_INSERT, entry_row(request, action, target, changes, redact=redact))
        return
    principal = _principal(request)
    core.record(session, principal.tenant_id, actor_of(request, principal), action, target=target,
                changes=changes, redact=redact, now=request.app.state.services.clock.now())


def entry_row(request: Request, action: str, target: str | None = None, changes: Any = None, *,
              redact: tuple[str, ...] = ()) -> dict[str, Any]:
    """The columns of the request's entry (`TABLE`), for a caller that inserts it in a statement of its own."""
    principal = _principal(request)
    return core.entry_values(principal.tenant_id, actor_of(request, principal), action, target=target,
                             changes=changes, redact=redact, now=request.app.state.services.clock.now())


def _principal(request: Request) -> Principal:
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise RuntimeError("audit() outside a signed-in request")
    return principal


def actor_of(request: Request, principal: Principal) -> core.Actor:
    kind, name, actor_id = principal.actor
    return core.Actor(kind, name, actor_id, request.client.host if request.client else None)

