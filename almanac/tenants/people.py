"""People and their roles in tenants."""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.errors import Conflict, NotFound, ValidationError
from almanac.tenants.models import ROLES, Membership, Tenant, User

__all__ = ["Membership", "add_member", "change_role", "remove_member", "members_of", "memberships_of"]
from almanac.tenants.passwords import check_password, generate_password, hash_password
from almanac.tenants.passwords import verify_password

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s]{1,63}$|^[^@\s]{1,64}@localhost$")


def normalize_email(email: str) -> str:
    email = (email or "").strip().lower()
    if len(email) > 320 or not _EMAIL.match(email) or not storable(email):
        raise ValidationError(f"{email!r} is not an email address.")
    return email


def storable(text: str) -> bool:
    """Text the database can hold: valid Unicode scalar values (no lone surrogates) and no NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValidationError(f"Role must be one of {', '.join(ROLES)}; got {role!r}.")
    return role


def find_user(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == normalize_email(email)))


def check_new_password(session: Session, email: str, password: str | None) -> None:
    """Validate a password before anything is written (an existing user keeps theirs)."""
    if password is not None and find_user(session, email) is None:
        check_password(password)


def add_member(
    session: Session, tenant: Tenant, email: str, role: str, password: str | None, *, now: datetime
) -> str | None:
    """Add a person to a tenant, creating the account if needed.

    Returns the generated password when a new account got one, so it can be shown once.
    An existing account keeps its password; giving one for it is refused rather than silently ignored.
    """
    check_role(role)
    email = normalize_email(email)
    user = find_user(session, email)
    generated = None
    if user is None:
        if password is None:
            password = generated = generate_password()
        user = User(email=email, password_hash=hash_password(password), created_at=now)
        session.add(user)
        session.flush()
    elif password is not None:
        raise Conflict(f"{email} already has an account; its password is not changed here.")
    exists = session.scalar(
        select(Membership.id).where(Membership.user_id == user.id, Membership.tenant_id == tenant.id)
    )
    if exists is not None:
        raise Conflict(f"{email} is already a member of {tenant.slug}.")
    session.add(Membership(user_id=user.id, tenant_id=tenant.id, role=role, created_at=now))
    session.flush()
    return generated


def memberships_of(session: Session, user_id: int) -> list[Membership]:
    query = select(Membership).where(Membership.user_id == user_id).join(Tenant).order_by(Tenant.slug)
    return list(session.scalars(query))


def members_of(session: Session, tenant_id: int) -> list[Membership]:
    query = select(Membership).where(Membership.tenant_id == tenant_id).join(User).order_by(User.email)
    return list(session.scalars(query))


def get_membership(session: Session, tenant_id: int, user_id: int) -> Membership:
    membership = session.scalar(
        select(Membership).where(Membership.tenant_id == tenant_id, Membership.user_id == user_id)
    )
    if membership is None:
        raise NotFound("No such member.")
    return membership


def change_role(session: Session, tenant_id: int, user_id: int, role: str) -> Membership:
    check_role(role)
    membership = get_membership(session, tenant_id, user_id)
    if membership.role == "admin" and role != "admin":
        _keep_one_admin(session, tenant_id)
    membership.role = role
    return membership


def remove_member(session: Session, tenant_id: int, user_id: int) -> None:
    membership = get_membership(session, tenant_id, user_id)
    if membership.role == "admin":
        _keep_one_admin(session, tenant_id)
    session.delete(membership)


def _keep_one_admin(session: Session, tenant_id: int) -> None:
    admins = session.scalars(
        select(Membership.id).where(Membership.tenant_id == tenant_id, Membership.role == "admin")
    ).all()
    if len(admins) <= 1:
        raise Conflict("A tenant keeps at least one admin.")


def change_password(session: Session, user_id: int, current: str, new: str) -> User:
    """A person changes their own password; the current one must be given (a stolen session is not enough)."""
    user = session.get(User, user_id)
    if user is None:
        raise NotFound("No such user.")
    if not verify_password(user.password_hash, current):
        raise ValidationError("The current password is wrong.")
    if new == current:
        raise ValidationError("The new password must differ from the current one.")
    user.password_hash = hash_password(new)
    return user
