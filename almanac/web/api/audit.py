"""The audit log (SPEC section 14), admin only: newest first, by time and actor, cursor paging."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Query
from pydantic import BaseModel

from almanac.tenants import audit
from almanac.web.api.schemas_scheduler import Instant
from almanac.web.deps import CurrentPrincipal, SharedSession, api_router

router = api_router(prefix="/audit", tags=["audit"], read="admin", write="admin")


class AuditEntryOut(BaseModel):
    id: int
    at: datetime
    actor: str
    actor_kind: str
    address: str | None
    action: str
    target: str | None
    changes: Any


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


def entry_out(row: audit.AuditEntry) -> AuditEntryOut:
    return AuditEntryOut(id=row.id, at=row.at, actor=row.actor, actor_kind=row.actor_kind, address=row.address,
                         action=row.action, target=row.target, changes=audit.changes_of(row))


@router.get("")
def list_audit(
    principal: CurrentPrincipal,
    session: SharedSession,
    since: Instant | None = None,
    actor: str | None = Query(default=None, max_length=320),
    cursor: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=audit.PAGE_MAX),
) -> AuditPage:
    rows, next_cursor = audit.page(session, principal.tenant_id, since=since, actor=actor, cursor=cursor, limit=limit)
    return AuditPage(items=[entry_out(r) for r in rows], next_cursor=next_cursor)
