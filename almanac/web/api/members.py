"""Members of the tenant (admin only): list, add, change role, remove."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from almanac.tenants import people
from almanac.tenants.models import Tenant
from almanac.web.deps import CurrentPrincipal, ServicesDep, SharedSession, api_router

router = api_router(prefix="/members", tags=["members"], read="admin", write="admin")
Role = Literal["admin", "editor", "viewer"]


class MemberIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str = Field(max_length=320)
    role: Role
    password: str | None = Field(default=None, min_length=10, max_length=256)


class MemberPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role


class MemberOut(BaseModel):
    user_id: int
    email: str
    role: str
    created_at: datetime
    generated_password: str | None = None


def _out(membership: people.Membership, generated: str | None = None) -> MemberOut:
    return MemberOut(
        user_id=membership.user_id, email=membership.user.email, role=membership.role,
        created_at=membership.created_at, generated_password=generated,
    )


@router.get("")
def list_members(principal: CurrentPrincipal, session: SharedSession) -> list[MemberOut]:
    return [_out(m) for m in people.members_of(session, principal.tenant_id)]


@router.post("", status_code=201)
def add_member(body: MemberIn, principal: CurrentPrincipal, session: SharedSession, services: ServicesDep) -> MemberOut:
    tenant = session.get(Tenant, principal.tenant_id)
    generated = people.add_member(session, tenant, body.email, body.role, body.password, now=services.clock.now())
    user = people.find_user(session, body.email)
    return _out(people.get_membership(session, principal.tenant_id, user.id), generated)


@router.patch("/{user_id}")
def change_role(user_id: int, body: MemberPatch, principal: CurrentPrincipal, session: SharedSession) -> MemberOut:
    return _out(people.change_role(session, principal.tenant_id, user_id, body.role))


@router.delete("/{user_id}", status_code=204)
def remove_member(user_id: int, principal: CurrentPrincipal, session: SharedSession) -> None:
    people.remove_member(session, principal.tenant_id, user_id)
