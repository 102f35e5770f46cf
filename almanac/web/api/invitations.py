"""Invitations of the tenant (admin only): list them (never their links) and revoke one.

They are made by `POST /api/v1/members` (members.py), which answers the link once.
"""

from __future__ import annotations

from almanac.tenants import invitations
from almanac.web.api.members import InvitationOut, invitation_out
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, SharedSession, api_router

router = api_router(prefix="/invitations", tags=["members"], read="admin", write="admin")


@router.get("")
def list_invitations(principal: CurrentPrincipal, session: SharedSession, services: ServicesDep) -> list[InvitationOut]:
    now = services.clock.now()
    return [invitation_out(row, now) for row in invitations.listing(session, principal.tenant_id)]


@router.delete("/{invitation_id}")
def revoke_invitation(invitation_id: int, principal: CurrentPrincipal, session: SharedSession,
                      services: ServicesDep) -> InvitationOut:
    now = services.clock.now()
    row = invitations.revoke(session, principal.tenant_id, invitation_id, now=now)
    audit(session, "invitation.revoke", f"invitation {row.id}", {"email": row.email})
    return invitation_out(row, now)
