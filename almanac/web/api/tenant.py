"""Who am I: the tenant and role behind the token."""

from __future__ import annotations

from pydantic import BaseModel

from almanac.web.deps import CurrentPrincipal, api_router

router = api_router(prefix="/tenant", tags=["tenant"])


class TenantOut(BaseModel):
    slug: str
    name: str
    role: str
    min_interval_seconds: int


@router.get("")
def current_tenant(principal: CurrentPrincipal) -> TenantOut:
    return TenantOut(
        slug=principal.tenant_slug, name=principal.tenant_name, role=principal.role,
        min_interval_seconds=principal.min_interval_seconds,
    )
