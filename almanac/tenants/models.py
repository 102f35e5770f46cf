"""Tables of the shared schema: tenants, people, memberships, API tokens, invitations, web sessions, audit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from almanac.db import IDS_NEVER_REUSED, SharedBase, UTCDateTime

ROLES = ("viewer", "editor", "admin")


class Tenant(SharedBase):
    __tablename__ = "tenants"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    min_interval_seconds: Mapped[int] = mapped_column(Integer, default=60)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class User(SharedBase):
    __tablename__ = "users"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Membership(SharedBase):
    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("user_id", "tenant_id"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    user: Mapped[User] = relationship(lazy="joined")
    tenant: Mapped[Tenant] = relationship(lazy="joined")


class ApiToken(SharedBase):
    __tablename__ = "api_tokens"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(10))
    # The public part of the token (after "alm_"), used to find the row; the secret is only hashed.
    public_id: Mapped[str] = mapped_column(String(20), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class Invitation(SharedBase):
    """A one-time link that makes whoever holds it (signed in with that email) a member."""

    __tablename__ = "invitations"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(10))
    # SHA-256 of the link's secret (256 random bits): the link itself is never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    invited_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    accepted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    accepted_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class WebSession(SharedBase):
    """A browser session kept on the server; the cookie holds only a random id whose SHA-256 is the key."""

    __tablename__ = "web_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=True, index=True)
    data: Mapped[str] = mapped_column(Text)  # JSON: chosen tenant, CSRF token, flashes
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class AuditEntry(SharedBase):
    """One change made in a tenant: who (a person or a token), when, from where, what."""

    __tablename__ = "audit_entries"
    __table_args__ = (Index("ix_audit_entries_tenant_id_id", "tenant_id", "id"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor_kind: Mapped[str] = mapped_column(String(10))  # "person" or "token"
    actor: Mapped[str] = mapped_column(String(320))  # the person's email or the token's name
    actor_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # user or token id (no FK: history stays)
    address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(300), nullable=True)
    changes: Mapped[str] = mapped_column(Text)  # JSON, secrets redacted, long values shortened
