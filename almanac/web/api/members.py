"""Members of the tenant (admin only): list, invite, change role, remove.

Adding a person is an invitation (SPEC section 3): the answer carries a one-time link and is
the same whether or not the email has an account; nobody here sets or sees a password.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from almanac.tenants import invitations, people
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, SharedSession, api_router

router = api_router(prefix="/members", tags=["members"], read="admin", write="admin")
Role = Literal["admin", "editor", "viewer"]


class MemberIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str = Field(max_length=320)
    role: Role


class MemberPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role


class MemberOut(BaseModel):
    user_id: int
    email: str
    role: str
    created_at: datetime


class InvitationOut(BaseModel):
    id: int
    email: str
    role: str
    status: Literal["pending", "accepted", "revoked", "expired"]
    invited_by: str
    created_at: datetime
    expires_at: datetime
    invitation_url: str | None = None  # only in the answer to POST /members, once


def invitation_out(row: invitations.Invitation, now: datetime, url: str | None = None) -> InvitationOut:
    return InvitationOut(
        id=row.id, email=row.email, role=row.role, status=invitations.status(row, now), invited_by=row.invited_by,
        created_at=row.created_at, expires_at=row.expires_at, invitation_url=url,
    )


def invitation_url(request: Request, token: str) -> str:
    return str(request.base_url).rstrip("/") + f"/invite/{token}"


def _out(membership: people.Membership) -> MemberOut:
    return MemberOut(user_id=membership.user_id, email=membership.user.email, role=membership.role,
                     created_at=membership.created_at)


@router.get("")
def list_members(principal: CurrentPrincipal, session: SharedSession) -> list[MemberOut]:
    return [_out(m) for m in people.members_of(session, principal.tenant_id)]


@router.post("", status_code=201)
def invite_member(body: MemberIn, request: Request, principal: CurrentPrincipal, session: SharedSession,
                  services: ServicesDep) -> InvitationOut:
    now = services.clock.now()
    row, token = invitations.create(session, principal.tenant_id, body.email, body.role,
                                    invited_by=principal.actor[1], now=now)
    audit(session, "invitation.create", f"invitation {row.id}", {"email": row.email, "role": row.role})
    return invitation_out(row, now, invitation_url(request, token))


@router.patch("/{user_id}")
def change_role(user_id: int, body: MemberPatch, principal: CurrentPrincipal, session: SharedSession) -> MemberOut:
    membership = people.change_role(session, principal.tenant_id, user_id, body.role)
    audit(session, "member.update", f"member {membership.user.email}", {"role": body.role})
    return _out(membership)


@router.delete("/{user_id}", status_code=204)
def remove_member(user_id: int, principal: CurrentPrincipal, session: SharedSession) -> None:
    email = people.get_membership(session, principal.tenant_id, user_id).user.email
    people.remove_member(session, principal.tenant_id, user_id)
    audit(session, "member.delete", f"member {email}")
