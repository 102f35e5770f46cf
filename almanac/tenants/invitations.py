"""Invitations (SPEC section 3): how a person joins a tenant.

An admin invites an email with a role and gets a one-time link (256 random bits, stored only as
a SHA-256, valid 7 days). Creating one never looks at the users table, so the answer cannot tell
whether the email has an account. Whoever opens the link must be that email's owner: signed in
as it, signing in with its password, or, when no account exists yet, choosing the password of a
new account. No admin ever sets or learns anyone's password.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.errors import Conflict, NotFound, ValidationError
from almanac.tenants.models import Invitation, Membership, Tenant, User
from almanac.tenants.passwords import hash_password
from almanac.tenants.people import check_role, normalize_email

VALID_FOR = timedelta(days=7)
TOKEN_MAX = 100
LIST_MAX = 200
INVALID = "This invitation link is not valid: it was used, revoked or has expired. Ask for a new one."


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


Status = Literal["pending", "accepted", "revoked", "expired"]


def status(row: Invitation, now: datetime) -> Status:
    if row.accepted_at is not None:
        return "accepted"
    if row.revoked_at is not None:
        return "revoked"
    return "expired" if row.expires_at <= now else "pending"


def create(session: Session, tenant_id: int, email: str, role: str, *, invited_by: str,
           now: datetime) -> tuple[Invitation, str]:
    """A new invitation and its secret (for the link, shown once). An older pending one for the
    same email in this tenant is revoked: one live link per person."""
    check_role(role)
    email = normalize_email(email)
    for older in session.scalars(select(Invitation).where(
            Invitation.tenant_id == tenant_id, Invitation.email == email,
            Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None))):
        older.revoked_at = now
    token = secrets.token_urlsafe(32)
    row = Invitation(tenant_id=tenant_id, email=email, role=role, token_hash=_hash(token),
                     invited_by=invited_by[:320], created_at=now, expires_at=now + VALID_FOR)
    session.add(row)
    session.flush()
    return row, token


def listing(session: Session, tenant_id: int) -> list[Invitation]:
    query = select(Invitation).where(Invitation.tenant_id == tenant_id).order_by(Invitation.id.desc())
    return list(session.scalars(query.limit(LIST_MAX)))


def revoke(session: Session, tenant_id: int, invitation_id: int, *, now: datetime) -> Invitation:
    row = session.scalar(select(Invitation).where(Invitation.id == invitation_id, Invitation.tenant_id == tenant_id))
    if row is None:
        raise NotFound("No such invitation.")
    if row.accepted_at is not None:
        raise Conflict("This invitation was already accepted; remove the member instead.")
    if row.revoked_at is None:
        row.revoked_at = now
    return row


def find_valid(session: Session, token: str, *, now: datetime) -> Invitation:
    """The pending invitation behind a link; NotFound for anything else (one message for all)."""
    if not token or len(token) > TOKEN_MAX:
        raise NotFound(INVALID)
    row = session.scalar(select(Invitation).where(Invitation.token_hash == _hash(token)))
    if row is None or status(row, now) != "pending":
        raise NotFound(INVALID)
    return row


def account_exists(session: Session, row: Invitation) -> bool:
    return session.scalar(select(User.id).where(User.email == row.email)) is not None


def tenant_of(session: Session, row: Invitation) -> Tenant:
    tenant = session.get(Tenant, row.tenant_id)
    assert tenant is not None  # the foreign key cascades on delete
    return tenant


def accept(session: Session, row: Invitation, user: User, *, now: datetime) -> Membership:
    """The invited person (proven: signed in as, or signed in with, that email) joins.

    Already a member: the membership stays as it is (an invitation never lowers nor raises a role
    someone already has); the invitation is used up either way.
    """
    if user.email != row.email:
        raise ValidationError(f"This invitation is for {row.email}; you are signed in as {user.email}.")
    membership = session.scalar(
        select(Membership).where(Membership.user_id == user.id, Membership.tenant_id == row.tenant_id)
    )
    if membership is None:
        membership = Membership(user_id=user.id, tenant_id=row.tenant_id, role=row.role, created_at=now)
        session.add(membership)
    row.accepted_at, row.accepted_user_id = now, user.id
    session.flush()
    return membership


def accept_with_new_account(session: Session, row: Invitation, password: str, *, now: datetime) -> User:
    """No account for the email yet: the invitee chooses its password, then joins."""
    if account_exists(session, row):
        raise Conflict("An account with this email exists now; sign in with its password instead.")
    user = User(email=row.email, password_hash=hash_password(password), created_at=now)
    session.add(user)
    session.flush()
    accept(session, row, user, now=now)
    return user
