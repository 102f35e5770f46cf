"""API tokens of the tenant (admin only): create (shown once), list with last use, revoke."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import BackgroundTasks, Request
from pydantic import BaseModel, ConfigDict, Field

from almanac.tenants import auth
from almanac.tenants.models import ApiToken, Tenant
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, SharedSession, api_router

router = api_router(prefix="/tokens", tags=["tokens"], read="admin", write="admin")


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: see schemas_scheduler.Strict
    name: str = Field(min_length=1, max_length=200)
    role: Literal["admin", "editor", "viewer"]


class TokenOut(BaseModel):
    id: int
    name: str
    role: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    token: str | None = None  # only in the answer to POST


def _out(row: ApiToken, plaintext: str | None = None) -> TokenOut:
    return TokenOut(
        id=row.id, name=row.name, role=row.role, prefix=f"alm_{row.public_id}", created_at=row.created_at,
        last_used_at=row.last_used_at, revoked_at=row.revoked_at, token=plaintext,
    )


@router.get("")
def list_tokens(principal: CurrentPrincipal, session: SharedSession) -> list[TokenOut]:
    return [_out(row) for row in auth.list_tokens(session, principal.tenant_id)]


@router.post("", status_code=201)
def create_token(body: TokenIn, principal: CurrentPrincipal, session: SharedSession, services: ServicesDep) -> TokenOut:
    tenant = session.get(Tenant, principal.tenant_id)
    row, plaintext = auth.create_token(session, tenant, body.name, body.role, now=services.clock.now())
    audit(session, "token.create", f"token {row.name}", {"name": row.name, "role": row.role})
    return _out(row, plaintext)


@router.delete("/{token_id}")
def revoke_token(token_id: int, principal: CurrentPrincipal, session: SharedSession, services: ServicesDep,
                 request: Request, background: BackgroundTasks) -> TokenOut:
    row = auth.revoke_token(session, principal.tenant_id, token_id, now=services.clock.now())
    audit(session, "token.revoke", f"token {row.name}")
    # Forgotten now and again after the commit: a request verifying the token in between may cache it.
    request.app.state.token_cache.forget(row.public_id)
    background.add_task(request.app.state.token_cache.forget, row.public_id)
    return _out(row)
