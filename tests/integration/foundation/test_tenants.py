"""Tenant provisioning on SQLite and PostgreSQL: own schema, migrated, nothing half-made."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, inspect, select

from almanac.db import TENANT_SCHEMA, Database, schema_for
from almanac.errors import Conflict, ValidationError
from almanac.tenants import migrations, people, registry
from almanac.tenants.models import Membership, Tenant, User


def _create(db: Database, slug: str, now: datetime, **kw: object) -> registry.CreatedTenant:
    args = dict(admin_email=f"boss@{slug}.test", admin_password=None, name=None, min_interval_seconds=60, now=now)
    args.update(kw)
    return registry.create_tenant(db, slug, **args)  # type: ignore[arg-type]


def _schema_exists(db: Database, slug: str) -> bool:
    if db.is_sqlite:
        return db.tenant_file(slug).exists()
    return schema_for(slug) in inspect(db.engine).get_schema_names()


def test_create_provisions_and_migrates_the_schema(database: Database, now: datetime) -> None:
    created = _create(database, "acme", now)
    assert created.admin_password  # generated, shown once
    assert _schema_exists(database, "acme")
    assert migrations.tenant_revision(database, "acme") is not None
    with database.shared_session() as session:
        tenant = registry.get_tenant(session, "acme")
        member = session.scalar(select(Membership).where(Membership.tenant_id == tenant.id))
        assert member.role == "admin" and member.user.email == "boss@acme.test"
        assert member.user.password_hash.startswith("$argon2id$")


def test_existing_slug_is_a_conflict_and_changes_nothing(database: Database, now: datetime) -> None:
    _create(database, "acme", now)
    with pytest.raises(Conflict):
        _create(database, "acme", now, admin_email="other@x.test")
    with database.shared_session() as session:
        assert session.scalar(select(User).where(User.email == "other@x.test")) is None
        assert len(registry.list_tenants(session)) == 1


def test_failure_after_the_schema_leaves_nothing(database: Database, now: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(people, "add_member", explode)
    with pytest.raises(RuntimeError):
        _create(database, "doomed", now)
    assert not _schema_exists(database, "doomed")
    with database.shared_session() as session:
        assert session.scalar(select(Tenant).where(Tenant.slug == "doomed")) is None


def test_bad_input_is_refused_before_anything_is_made(database: Database, now: datetime) -> None:
    for kwargs in ({"admin_email": "not-an-email"}, {"admin_password": "short"}, {"min_interval_seconds": 0}):
        with pytest.raises(ValidationError):
            _create(database, "bad", now, **kwargs)
    assert not _schema_exists(database, "bad")


def test_tenant_sessions_see_only_their_own_schema(database: Database, now: datetime) -> None:
    _create(database, "alpha", now)
    _create(database, "beta", now)
    notes = Table("notes", MetaData(schema=TENANT_SCHEMA), Column("id", Integer, primary_key=True), Column("text", String(50)))
    for slug in ("alpha", "beta"):
        with database.tenant_connection(slug) as conn:
            notes.create(conn)
            conn.execute(notes.insert().values(text=f"secret of {slug}"))
            conn.commit()
    with database.tenant_connection("beta") as conn:
        assert [r.text for r in conn.execute(select(notes))] == ["secret of beta"]


def test_migrate_all_is_idempotent(database: Database, now: datetime) -> None:
    _create(database, "acme", now)
    assert registry.migrate_all(database) == registry.MigrationReport(["acme"], {})
    assert registry.migrate_all(database) == registry.MigrationReport(["acme"], {})


def test_more_tenants_than_sqlite_can_attach_at_once(database: Database, now: datetime) -> None:
    """SQLite attaches at most 10 files per connection; sessions over 12 tenants, twice round, still work."""
    slugs = [f"t{i}" for i in range(12)]
    for slug in slugs:
        _create(database, slug, now)
    for _ in range(2):
        for slug in slugs:
            assert migrations.tenant_revision(database, slug) is not None


def _break_tenant(database: Database, slug: str) -> None:
    """Point a tenant's schema at a revision that does not exist: alembic refuses to upgrade it."""
    version = Table("alembic_version", MetaData(), Column("version_num", String(32)), schema=TENANT_SCHEMA)
    with database.tenant_connection(slug) as conn:
        conn.execute(version.update().values(version_num="not_a_revision"))
        conn.commit()


def test_migrate_all_reports_a_failed_tenant_and_carries_on(database: Database, now: datetime) -> None:
    for slug in ("alpha", "beta", "gamma"):
        _create(database, slug, now)
    _break_tenant(database, "beta")
    report = registry.migrate_all(database)
    assert report.migrated == ["alpha", "gamma"]
    assert list(report.failed) == ["beta"] and "not_a_revision" in report.failed["beta"]


def _catalog(db: Database, slug: str) -> dict[str, list[tuple[object, ...]]]:
    """Everything a schema holds that a migration makes, with the schema's own name taken out."""
    from sqlalchemy import text

    schema = schema_for(slug)
    queries = {
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default FROM "
                   "information_schema.columns WHERE table_schema = :s ORDER BY 1, 2",
        "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :s ORDER BY 1",
        "constraints": "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                       "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = :s ORDER BY 1, 2",
        "sequences": "SELECT sequence_name, data_type FROM information_schema.sequences WHERE sequence_schema = :s "
                     "ORDER BY 1",
    }
    with db.engine.connect() as conn:
        return {name: [tuple(str(v).replace(schema, "S") for v in row) for row in conn.execute(text(sql), {"s": schema})]
                for name, sql in queries.items()}


def test_a_new_tenant_from_the_recorded_migrations_is_the_schema_alembic_makes(database: Database,
                                                                                now: datetime) -> None:
    """on PostgreSQL a new tenant's schema is made by replaying the migrations recorded once
    (one script), not by alembic; the result must be the very schema alembic makes."""
    if database.is_sqlite:
        pytest.skip("SQLite tenants are files migrated by alembic")
    _create(database, "replayed", now)
    assert database.url in migrations._recorded  # made from the recording, not by alembic
    migrations.upgrade_tenant(database, "migrated")
    assert migrations.tenant_revision(database, "replayed") == migrations.head_revision()
    replayed, migrated = _catalog(database, "replayed"), _catalog(database, "migrated")
    assert replayed["columns"] and replayed["indexes"] and replayed["constraints"]
    assert replayed == migrated
    assert migrations.TEMPLATE_SCHEMA not in inspect(database.engine).get_schema_names()  # rolled back


def _sqlite_catalog(db: Database, slug: str) -> list[tuple[str, ...]]:
    with db.tenant_connection(slug) as conn:
        rows = conn.exec_driver_sql(f'SELECT type, name, tbl_name, sql FROM "{schema_for(slug)}".sqlite_master '
                                    "ORDER BY type, name").all()
        return [tuple(str(v) for v in row) for row in rows]


def test_a_new_sqlite_tenant_from_the_template_file_is_the_file_alembic_makes(
        database: Database, now: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    """On SQLite a new tenant's file is a copy of one alembic made once a process: same tables,
    indexes and revision as a tenant alembic migrates itself."""
    if not database.is_sqlite:
        pytest.skip("PostgreSQL tenants are schemas made from the recorded migrations (test above)")
    migrations._sqlite_template(database)  # made once a process: before alembic is taken away
    alembic = migrations.upgrade_tenant
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "upgrade_tenant", lambda *a: pytest.fail("alembic ran for a new tenant"))
        _create(database, "copied", now)
    alembic(database, "migrated")
    assert migrations.tenant_revision(database, "copied") == migrations.head_revision()
    copied = _sqlite_catalog(database, "copied")
    assert any(kind == "index" for kind, *_ in copied) and len(copied) > 10
    assert copied == _sqlite_catalog(database, "migrated")
    assert not [p.name for p in database.tenant_dir().iterdir() if p.name.endswith(".new")]  # nothing staged left


def test_a_half_made_sqlite_tenant_file_is_finished_by_alembic_not_overwritten(database: Database) -> None:
    if not database.is_sqlite:
        pytest.skip("SQLite tenant files only")
    half = database.tenant_file("half")
    with database.tenant_connection("half") as conn:  # a file a crash left: it exists, with a row of its own
        conn.exec_driver_sql('CREATE TABLE "t_half".left_behind (x INTEGER)')
        conn.exec_driver_sql('INSERT INTO "t_half".left_behind VALUES (7)')
        conn.commit()
    migrations.create_tenant_schema(database, "half")
    assert half.exists() and migrations.tenant_revision(database, "half") == migrations.head_revision()
    with database.tenant_connection("half") as conn:
        assert conn.exec_driver_sql('SELECT x FROM "t_half".left_behind').scalar() == 7
