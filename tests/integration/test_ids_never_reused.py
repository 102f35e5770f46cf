"""An integer id, once given, is never given again (a new schedule must not inherit a deleted one's
runs and audit entries), on both backends, and the migrations agree with the models about it.

SQLite gives `max(id) + 1` unless a table is AUTOINCREMENT (its high-water mark in `sqlite_sequence`);
PostgreSQL's sequences never go back.
"""

from __future__ import annotations

from typing import Any

from alembic import command
from sqlalchemy import Integer, MetaData, Table, inspect

from almanac.db import Database, SharedBase, TenantBase, schema_for
from almanac.tenants import migrations
from tests.integration.test_migrations import _import_all_models

# The revisions just before the ones that make the tables AUTOINCREMENT on SQLite.
SHARED_BEFORE, TENANT_BEFORE = "s0011_due_index_moved", "t0023_pending_jobs_held"


def _reopened(services: Any, database: Database) -> None:
    """Every pooled connection closed: the next request opens the database afresh."""
    services.db.dispose()
    database.dispose()


def _created(client: Any, path: str, body: dict[str, Any]) -> int:
    answer = client.post(path, json=body)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def test_a_deleted_rows_id_is_not_given_again(api: Any, services: Any, database: Database) -> None:
    admin = api("admin")
    script = {"name": "s", "source": "export default () => 1;"}
    schedule = {"name": "d", "rule": "@daily"}
    target = {"kind": "email", "name": "w", "topics": ["a.b"], "recipients": ["ops@example.test"]}
    sid = _created(admin, "/api/v1/scripts", script)
    first = {
        "scripts": _created(admin, "/api/v1/scripts", {**script, "name": "t"}),
        "schedules": _created(admin, "/api/v1/schedules", {**schedule, "script_id": sid}),
        "targets": _created(admin, "/api/v1/targets", target),
    }
    for path, row in first.items():  # each the newest of its table: max + 1 would give it again
        assert admin.delete(f"/api/v1/{path}/{row}").status_code == 204
    _reopened(services, database)
    assert _created(admin, "/api/v1/scripts", {**script, "name": "u"}) > first["scripts"]
    assert _created(admin, "/api/v1/schedules", {**schedule, "script_id": sid}) > first["schedules"]
    assert _created(admin, "/api/v1/targets", target) > first["targets"]


def _with_integer_ids(metadata: MetaData) -> list[Table]:
    """The tables whose key is one integer column that the database numbers."""
    out = []
    for table in metadata.tables.values():
        key = list(table.primary_key.columns)
        if len(key) == 1 and isinstance(key[0].type, Integer) and key[0] is table.autoincrement_column:
            out.append(table)
    return out


def _autoincrement_tables(conn: Any, schema: str | None) -> set[str]:
    master = f'"{schema}".sqlite_master' if schema else "sqlite_master"
    rows = conn.exec_driver_sql(f"SELECT name, sql FROM {master} WHERE type = 'table'").all()
    return {name for name, sql in rows if "AUTOINCREMENT" in (sql or "").upper()}


def test_models_and_migrations_agree_every_integer_id_is_autoincrement(database: Database, make_tenant: Any) -> None:
    _import_all_models()
    shared, tenant = _with_integer_ids(SharedBase.metadata), _with_integer_ids(TenantBase.metadata)
    # BIGINT keys (delivery_signals, PostgreSQL's only) are identities there, and SQLite cannot AUTOINCREMENT them.
    shared_sqlite = {t.name for t in shared if type(t.primary_key.columns[0].type) is Integer}
    tenant_sqlite = {t.name for t in tenant if type(t.primary_key.columns[0].type) is Integer}
    assert {"tenants", "users", "api_tokens", "audit_entries"} <= shared_sqlite
    assert {"scripts", "schedules", "jobs", "occurrences", "runs", "events", "targets"} <= tenant_sqlite
    for table in shared + tenant:  # the models say so (what a database made from them would do)
        wanted = table.name in shared_sqlite | tenant_sqlite
        assert table.dialect_options["sqlite"]["autoincrement"] is wanted, table.name
    if not database.is_sqlite:
        return
    slug = make_tenant()
    with database.engine.connect() as conn:
        assert _autoincrement_tables(conn, None) == shared_sqlite
    with database.tenant_connection(slug) as conn:
        assert _autoincrement_tables(conn, schema_for(slug)) == tenant_sqlite


def _sqlite_objects(conn: Any, schema: str) -> dict[tuple[str, str], str]:
    rows = conn.exec_driver_sql(f'SELECT type, name, sql FROM "{schema}".sqlite_master WHERE sql IS NOT NULL').all()
    return {(kind, name): sql for kind, name, sql in rows}


def test_the_migration_keeps_existing_rows_and_never_reuses_their_ids(sqlite_settings: Any) -> None:
    """An existing SQLite tenant (made before the change) is rebuilt: rows, the rows that refer to
    them (deleting a table must not cascade), indexes and ids are all kept; a deleted id stays used."""
    db = Database(sqlite_settings)
    try:
        migrations.upgrade_shared(db)
        schema = schema_for("old")
        with db.tenant_connection("old") as conn:
            command.upgrade(migrations._config("tenant", conn, schema, db.settings), TENANT_BEFORE)
            conn.exec_driver_sql(
                f'INSERT INTO "{schema}".scripts (id, name, current_version, timeout_ms, memory_mb, created_at, '
                "updated_at) VALUES (1, 'a', 1, 1000, 32, '2026-01-01', '2026-01-01'), "
                "(2, 'b', 1, 1000, 32, '2026-01-01', '2026-01-01')")
            conn.exec_driver_sql(f'INSERT INTO "{schema}".script_versions (script_id, version, source, created_at) '
                                 "VALUES (1, 1, 'x', '2026-01-01'), (2, 1, 'y', '2026-01-01')")
            conn.commit()
            before = _sqlite_objects(conn, schema)
            assert not _autoincrement_tables(conn, schema)
        migrations.upgrade_tenant(db, "old")  # as `almanac migrate` does
        with db.tenant_connection("old") as conn:
            after = _sqlite_objects(conn, schema)
            assert {k: v for k, v in before.items() if k[0] == "index"} == {
                k: v for k, v in after.items() if k[0] == "index"}  # the partial index too
            assert "scripts" in _autoincrement_tables(conn, schema)
            versions = f'SELECT script_id, source FROM "{schema}".script_versions ORDER BY script_id'
            assert conn.exec_driver_sql(versions).all() == [(1, "x"), (2, "y")]
            conn.exec_driver_sql(f'DELETE FROM "{schema}".scripts WHERE id = 2')
            conn.exec_driver_sql(f'INSERT INTO "{schema}".scripts (name, current_version, timeout_ms, memory_mb, '
                                 "created_at, updated_at) VALUES ('c', 1, 1000, 32, '2026-01-02', '2026-01-02')")
            assert conn.exec_driver_sql(f"SELECT max(id) FROM \"{schema}\".scripts").scalar() == 3
            assert conn.exec_driver_sql(versions).all() == [(1, "x")]  # the delete cascaded as always
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1  # on again for this connection
            conn.rollback()
        with db.engine.connect() as conn:
            assert inspect(conn).get_table_names()  # the shared schema is still there
    finally:
        db.dispose()
