"""Tenants: create (schema, migrations and first admin in one step), find, list.

Creating a tenant touches two places (its own schema, the shared rows), which
SQLite cannot commit as one transaction across files; so the schema is made
first, the shared rows second in one transaction, and the schema is dropped
again if anything fails. Nothing is left half-made.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.db import Database, validate_slug
from almanac.errors import Conflict, NotFound, ValidationError
from almanac.tenants import migrations, people
from almanac.tenants.models import Tenant

log = logging.getLogger("almanac.tenants")

NAME_MAX = 200


@dataclass(frozen=True)
class CreatedTenant:
    tenant_id: int
    slug: str
    admin_email: str
    admin_password: str | None  # set when it was generated, so it can be shown once


def get_tenant(session: Session, slug: str) -> Tenant:
    tenant = session.scalar(select(Tenant).where(Tenant.slug == slug))
    if tenant is None:
        raise NotFound(f"No tenant named {slug!r}.")
    return tenant


def list_tenants(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.slug)))


def list_slugs(db: Database) -> list[str]:
    with db.shared_session() as session:
        return list(session.scalars(select(Tenant.slug).order_by(Tenant.slug)))


def create_tenant(
    db: Database,
    slug: str,
    *,
    admin_email: str,
    admin_password: str | None,
    name: str | None,
    min_interval_seconds: int,
    now: datetime,
) -> CreatedTenant:
    validate_slug(slug)
    name = (name or slug).strip()
    if not name or len(name) > NAME_MAX:
        raise ValidationError(f"A tenant name must be 1 to {NAME_MAX} characters.")
    if not (1 <= min_interval_seconds <= 86_400):
        raise ValidationError("The minimum interval must be between 1 and 86400 seconds.")
    email = people.normalize_email(admin_email)
    with db.shared_session() as session:
        if session.scalar(select(Tenant.id).where(Tenant.slug == slug)) is not None:
            raise Conflict(f"A tenant named {slug!r} already exists.")
        people.check_new_password(session, email, admin_password)
    migrations.create_tenant_schema(db, slug)
    try:
        with db.shared_session() as session:
            tenant = Tenant(slug=slug, name=name, min_interval_seconds=min_interval_seconds, created_at=now)
            session.add(tenant)
            session.flush()
            generated = people.add_member(session, tenant, email, "admin", admin_password, now=now)
            tenant_id = tenant.id
    except BaseException:
        migrations.drop_tenant_schema(db, slug)
        raise
    return CreatedTenant(tenant_id, slug, email, generated)


@dataclass(frozen=True)
class MigrationReport:
    """What `migrate_all` did: the tenants brought to the newest revision, and why the others were not."""

    migrated: list[str]
    failed: dict[str, str]


def migrate_all(db: Database) -> MigrationReport:
    """Upgrade the shared schema, then every tenant's.

    One tenant whose schema cannot be upgraded (a hand-edited table, a lock held too long) must not
    keep the others on the old revision: its error is logged and reported, and the rest carry on.
    """
    migrations.upgrade_shared(db)
    migrated: list[str] = []
    failed: dict[str, str] = {}
    for slug in list_slugs(db):
        try:
            migrations.upgrade_tenant(db, slug)
        except Exception as exc:  # any failure of one tenant's upgrade; each runs in its own transaction
            log.exception("migrate.tenant_failed", extra={"event": "migrate.tenant_failed", "tenant": slug})
            failed[slug] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        else:
            migrated.append(slug)
    return MigrationReport(migrated, failed)
