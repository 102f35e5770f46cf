"""The tenant's egress allowlist (SPEC section 6, admin): the hosts its scripts' `fetch` may reach."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from almanac.egress import allowlist, store
from almanac.web.audit import audit
from almanac.web.deps import ServicesDep, TenantSession, api_router

router = api_router(prefix="/egress", tags=["egress"], read="admin", write="admin")


class EgressIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "example": {"hosts": ["api.example.com", "*.example.org", "host:8443"]}})
    hosts: list[str] = Field(max_length=allowlist.MAX_ENTRIES, description=(
        "host names, `*.domain` wildcards (names below the domain) or IP addresses, each with an optional "
        "`:port` (without one, the scheme's own port: 443 for https, 80 for http); the whole list is replaced"))


class EgressOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"hosts": ["api.example.com", "*.example.org"]}})
    hosts: list[str] = Field(description="the allowlist as stored (lower case, IDNA-encoded names); empty: "
                                         "scripts can reach nothing")


@router.get("")
def get_egress(session: TenantSession) -> EgressOut:
    return EgressOut(hosts=store.hosts(session))


@router.put("")
def put_egress(body: EgressIn, session: TenantSession, services: ServicesDep) -> EgressOut:
    before = store.hosts(session)
    hosts = store.replace(session, body.hosts, now=services.clock.now())
    audit(session, "egress.put", "egress", {"before": before, "hosts": hosts})
    return EgressOut(hosts=hosts)
