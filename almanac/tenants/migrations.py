"""Apply the alembic trees: the shared schema, and each tenant's schema.

There is no alembic.ini: the trees ship inside the package (`almanac/migrations/shared` and
`almanac/migrations/tenant`) so an installed wheel migrates as well as a checkout does, and the
connection is handed to their env.py through `config.attributes`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Column, MetaData, String, Table, delete, select
from sqlalchemy.schema import CreateSchema, DropSchema

from almanac.db import TENANT_SCHEMA, Database, schema_for

ALEMBIC_DIR = Path(__file__).resolve().parents[1] / "migrations"


def _config(tree: str, connection: Any, schema: str | None = None, settings: Any = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR / tree))
    cfg.attributes["connection"] = connection
    cfg.attributes["schema"] = schema
    cfg.attributes["settings"] = settings  # t0009 encrypts existing webhook secrets under the operator's key
    return cfg


def upgrade_shared(db: Database) -> None:
    with db.engine.connect() as conn:
        command.upgrade(_config("shared", conn), "head")
        conn.commit()


def upgrade_tenant(db: Database, slug: str) -> None:
    """Create the tenant's schema if it is missing, then bring it to the newest revision."""
    schema = schema_for(slug)
    if not db.is_sqlite:
        with db.engine.begin() as conn:
            conn.execute(CreateSchema(schema, if_not_exists=True))
    with db.tenant_connection(slug) as conn:
        command.upgrade(_config("tenant", conn, schema, db.settings), "head")
        if conn.in_transaction():
            conn.commit()


def drop_tenant_schema(db: Database, slug: str) -> None:
    """Remove a tenant's schema entirely (used to undo a half-made tenant)."""
    schema = schema_for(slug)
    if db.is_sqlite:
        db.engine.dispose()  # pooled connections may hold the file attached
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(db.tenant_file(slug)) + suffix).unlink(missing_ok=True)
        return
    # The shared due index (almanac.platform.coordination_models.DueEntry; tenants may not import the platform).
    due_index = Table("due_index", MetaData(), Column("tenant_slug", String(40)))
    with db.engine.begin() as conn:
        conn.execute(DropSchema(schema, cascade=True, if_exists=True))
        # Its triggers went with the schema; its rows of the shared due index go in the same transaction.
        conn.execute(delete(due_index).where(due_index.c.tenant_slug == slug))


def tenant_revision(db: Database, slug: str) -> str | None:
    with db.tenant_connection(slug) as conn:
        version = Table("alembic_version", MetaData(), Column("version_num", String(32)), schema=TENANT_SCHEMA)
        row = conn.execute(select(version.c.version_num)).first()
        return row[0] if row else None
