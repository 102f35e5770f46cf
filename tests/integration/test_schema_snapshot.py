"""The committed schema snapshot (`almanac/migrations/schema/`) is what the migrations make, and the models agree.

Migrating from empty (the shared schema, and a tenant's both as a new tenant is made and by alembic
revision by revision) must give exactly the snapshot: tables, indexes, constraints, functions and
triggers. A change of schema is then seen in review as a change of the snapshot. `make
schema-snapshot` rewrites the files (ALMANAC_SCHEMA_SNAPSHOT=write on this module).

The models (`create_all`) must agree with the migrated tables: same tables, columns, types,
nullability and indexes, but for the differences listed in `_ALLOWED`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.schema import CreateSchema

from almanac.db import Database, SharedBase, TenantBase, schema_for
from almanac.tenants.migrations import upgrade_tenant
from tests.integration.test_migrations import _import_all_models
from tests.support.schema_dump import dump, sections, snapshot_path

WRITE = os.environ.get("ALMANAC_SCHEMA_SNAPSHOT") == "write"


def _matches_snapshot(backend: str, tree: str, dumped: str) -> None:
    path = snapshot_path(backend, tree)
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumped)
        return
    assert sections(dumped) == sections(path.read_text()), f"{path.name}: run `make schema-snapshot` and review"


def test_migrating_from_empty_gives_exactly_the_snapshot(database: Database, backend: str,
                                                         make_tenant: Callable[..., str]) -> None:
    _matches_snapshot(backend, "shared", dump(database, "shared"))
    made = dump(database, "tenant", make_tenant("snapshot-made"))  # the way a new tenant is made
    upgrade_tenant(database, "snapshot-alembic")  # alembic, revision by revision, from an empty schema
    assert sections(made) == sections(dump(database, "tenant", "snapshot-alembic"))
    _matches_snapshot(backend, "tenant", made)


# Differences between the models and the migrated tables, each with its reason.
_ALLOWED = {
    # PostgreSQL keeps the count of pending jobs in a table of its triggers (t0017), read through
    # `quotas.PENDING_JOB_COUNTS`; SQLite counts the jobs and has no such table.
    "pending_job_counts",
    # alembic's own version table, in each tree.
    "alembic_version",
}


def _structure(conn: Any, schema: str | None) -> dict[str, Any]:
    """Each table: its columns (name, type, nullable) and indexes (name, columns, unique), as sets."""
    found = inspect(conn)
    out = {}
    for table in found.get_table_names(schema=schema):
        if table in _ALLOWED:
            continue
        columns = {(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table, schema=schema)}
        indexes = {(i["name"], tuple(i["column_names"]), bool(i["unique"]))
                   for i in found.get_indexes(table, schema=schema)}
        out[table] = (columns, indexes)
    return out


def _models(database: Database, base: Any, folder: Path) -> dict[str, Any]:
    """The tables `create_all` makes of `base`'s models, on a fresh database or schema of the same backend
    (a fresh engine: SQLAlchemy caches statements by their schema map)."""
    if database.is_sqlite:
        folder.mkdir(parents=True, exist_ok=True)
        engine = create_engine(f"sqlite:///{folder / 'models.db'}")
        schema = None
    else:
        with database.engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS models CASCADE"))
            conn.execute(CreateSchema("models"))
        engine = create_engine(database.settings.database_url, connect_args={"options": "-c search_path=models"})
        schema = "models"
    try:
        with engine.begin() as conn:
            base.metadata.create_all(conn.execution_options(schema_translate_map={"tenant": schema}))
        with engine.connect() as conn:
            return _structure(conn, schema)
    finally:
        engine.dispose()


def test_the_models_agree_with_the_migrated_tables(database: Database, make_tenant: Callable[..., str],
                                                   tmp_path: Path) -> None:
    _import_all_models()
    slug = make_tenant("models-agree")
    with database.engine.connect() as conn:
        shared = None if database.is_sqlite else conn.execute(text("SELECT current_schema()")).scalar_one()
        migrated_shared = _structure(conn, shared)
    with database.tenant_connection(slug) as conn:
        migrated_tenant = _structure(conn, schema_for(slug))
    assert _models(database, SharedBase, tmp_path / "shared") == migrated_shared
    assert _models(database, TenantBase, tmp_path / "tenant") == migrated_tenant
