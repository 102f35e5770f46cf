"""Who am I: the tenant and role behind the token, with the tenant's quotas and their use."""

from __future__ import annotations

from pydantic import BaseModel

from almanac.platform.store import quotas
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="/tenant", tags=["tenant"])


class QuotaOut(BaseModel):
    limit: int
    used: int
    used_bytes: int | None = None  # kv_mb only: the use in bytes


class TenantOut(BaseModel):
    slug: str
    name: str
    role: str
    min_interval_seconds: int
    quotas: dict[str, QuotaOut]  # kv_mb, kv_keys, schedules, pending_jobs, runs_per_day, cpu_seconds_per_day


@router.get("")
def current_tenant(principal: CurrentPrincipal, session: TenantSession, services: ServicesDep) -> TenantOut:
    report = quotas.report(quotas.of(session), quotas.use(session, services.clock.now()))
    return TenantOut(
        slug=principal.tenant_slug, name=principal.tenant_name, role=principal.role,
        min_interval_seconds=principal.min_interval_seconds,
        quotas={name: QuotaOut(**values) for name, values in report.items()},
    )
