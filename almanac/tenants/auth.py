"""Who is asking: API tokens and passwords, resolved to a principal (tenant + role)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.errors import NotFound, Unauthorized, ValidationError
from almanac.tenants import tokens
from almanac.tenants.models import ROLES, ApiToken, Membership, Tenant, User
from almanac.tenants.passwords import DUMMY_HASH, verify_password
from almanac.tenants.people import check_role, normalize_email, storable

# Writing last_used_at on every request would turn reads into writes; a minute's precision is plenty.
LAST_USED_PRECISION = timedelta(seconds=60)
TOKEN_NAME_MAX = 200


@dataclass(frozen=True)
class Principal:
    """A person or a program acting inside one tenant with one role."""

    tenant_id: int
    tenant_slug: str
    tenant_name: str
    min_interval_seconds: int
    role: str
    user_id: int | None = None
    email: str | None = None
    token_id: int | None = None
    token_name: str | None = None

    def has(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    @property
    def actor(self) -> tuple[str, str, int | None]:
        """(kind, name, id) as the audit log records it: a person by email, a token by its name."""
        if self.token_id is not None:
            return "token", self.token_name or f"token {self.token_id}", self.token_id
        return "person", self.email or f"user {self.user_id}", self.user_id


def authenticate_token(session: Session, plaintext: str, *, now: datetime) -> Principal:
    principal, stale = verify_token(session, plaintext, now=now)
    if stale:
        stamp_token_use(session, principal, now)
    return principal


def stamp_token_use(session: Session, principal: Principal, now: datetime) -> None:
    """Record the token's last use (`verify_token` says when it is due)."""
    token = session.get(ApiToken, principal.token_id)
    if token is not None:
        token.last_used_at = now


def verify_token(session: Session, plaintext: str, *, now: datetime) -> tuple[Principal, bool]:
    """The principal behind a token, and whether its last use is due to be recorded; reads only."""
    parts = tokens.split(plaintext.strip())
    if parts is None:
        raise Unauthorized("The API token is malformed.")
    public_id, secret = parts
    # The token and its tenant in one query: every API request pays for this round trip.
    found = session.execute(select(ApiToken, Tenant).join(Tenant, Tenant.id == ApiToken.tenant_id)
                            .where(ApiToken.public_id == public_id)).first()
    row, tenant = found if found is not None else (None, None)
    if row is None or row.revoked_at is not None or not tokens.secret_matches(secret, row.secret_hash):
        raise Unauthorized("The API token is unknown or revoked.")
    stale = row.last_used_at is None or now - row.last_used_at >= LAST_USED_PRECISION
    assert tenant is not None  # the foreign key cascades on delete
    return _principal(tenant, row.role, token_id=row.id, token_name=row.name), stale


def authenticate_password(session: Session, email: str, password: str) -> User:
    try:
        user = session.scalar(select(User).where(User.email == normalize_email(email)))
    except ValidationError:
        user = None
    if user is None:
        verify_password(DUMMY_HASH, password)  # same work either way
        raise Unauthorized("Wrong email or password.")
    if not verify_password(user.password_hash, password):
        raise Unauthorized("Wrong email or password.")
    return user


def principal_for_member(session: Session, user_id: int, tenant_slug: str) -> Principal:
    membership = session.scalar(
        select(Membership).join(Tenant).where(Membership.user_id == user_id, Tenant.slug == tenant_slug)
    )
    if membership is None:
        raise Unauthorized("You are not a member of this tenant.")
    return _principal(membership.tenant, membership.role, user_id=user_id, email=membership.user.email)


def _principal(tenant: Tenant, role: str, **who: object) -> Principal:
    return Principal(
        tenant_id=tenant.id,
        tenant_slug=tenant.slug,
        tenant_name=tenant.name,
        min_interval_seconds=tenant.min_interval_seconds,
        role=role,
        **who,  # type: ignore[arg-type]
    )


def create_token(session: Session, tenant: Tenant, name: str, role: str, *, now: datetime) -> tuple[ApiToken, str]:
    name = (name or "").strip()
    if not name or len(name) > TOKEN_NAME_MAX or not storable(name):
        raise ValidationError(f"A token name must be 1 to {TOKEN_NAME_MAX} characters.")
    check_role(role)
    minted = tokens.mint()
    row = ApiToken(
        tenant_id=tenant.id, name=name, role=role, public_id=minted.public_id,
        secret_hash=minted.secret_hash, created_at=now,
    )
    session.add(row)
    session.flush()
    return row, minted.plaintext


def list_tokens(session: Session, tenant_id: int) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).where(ApiToken.tenant_id == tenant_id).order_by(ApiToken.id)))


def revoke_token(session: Session, tenant_id: int, token_id: int, *, now: datetime) -> ApiToken:
    row = session.scalar(select(ApiToken).where(ApiToken.id == token_id, ApiToken.tenant_id == tenant_id))
    if row is None:
        raise NotFound("No such token.")
    if row.revoked_at is None:
        row.revoked_at = now
    return row
