"""Apply the alembic trees: the shared schema, and each tenant's schema.

There is no alembic.ini: the trees ship inside the package (`almanac/migrations/shared` and
`almanac/migrations/tenant`) so an installed wheel migrates as well as a checkout does, and the
connection is handed to their env.py through `config.attributes`.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Column, MetaData, String, Table, delete, event, select
from sqlalchemy.schema import CreateSchema, DropSchema

from almanac.db import TENANT_SCHEMA, Database, met_schema, schema_for

log = logging.getLogger(__name__)
ALEMBIC_DIR = Path(__file__).resolve().parents[1] / "migrations"


def _config(tree: str, connection: Any, schema: str | None = None, settings: Any = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR / tree))
    cfg.attributes["connection"] = connection
    cfg.attributes["schema"] = schema
    cfg.attributes["settings"] = settings  # t0009 encrypts existing webhook secrets under the operator's key
    return cfg


@contextmanager
def _sqlite_foreign_keys_off(conn: Any) -> Iterator[None]:
    """SQLite: foreign keys not enforced while migrations run, as SQLite's own recipe for rebuilding a
    table asks (`migrations.sqlite_rebuild`: dropping a table would otherwise delete the rows that
    refer to it). The pragma is a no-op inside a transaction, so it is set before one begins and set
    back after the migrations' transaction has ended; the pooled connection leaves enforcing again."""
    if conn.dialect.name != "sqlite":
        yield
        return
    dbapi = conn.connection.dbapi_connection
    dbapi.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        if conn.in_transaction():
            conn.rollback()
        dbapi.execute("PRAGMA foreign_keys=ON")


def upgrade_shared(db: Database) -> None:
    with db.engine.connect() as conn, _sqlite_foreign_keys_off(conn):
        command.upgrade(_config("shared", conn), "head")
        conn.commit()


def upgrade_tenant(db: Database, slug: str) -> None:
    """Create the tenant's schema if it is missing, then bring it to the newest revision."""
    schema = schema_for(slug)
    if not db.is_sqlite:
        with db.engine.begin() as conn:
            conn.execute(CreateSchema(schema, if_not_exists=True))
    with db.tenant_connection(slug) as conn, _sqlite_foreign_keys_off(conn):
        command.upgrade(_config("tenant", conn, schema, db.settings), "head")
        if conn.in_transaction():
            conn.commit()


# -- a new tenant from the recorded migrations (PostgreSQL) ---------------------------------
#
# Running every migration through alembic costs ~0.3-0.7 s a tenant on a busy 2-core box (loading
# the scripts, alembic's own look-ups, one statement at a time with Python in between): 1,000 tenants
# took minutes. A new schema is always empty, so what the migrations do to it is always the same
# statements: they are recorded once a process, on a template schema inside a transaction that is
# rolled back, and replayed for each new tenant with the template's name replaced, in one
# transaction that also checks the result is at the newest revision (else alembic does it).
# Existing tenants are still migrated by alembic (`upgrade_tenant`).

TEMPLATE_SCHEMA = "t__template"  # never a tenant's: slugs hold no underscores (db.schema_for)
_recorded: dict[str, list[tuple[str, Any, bool]]] = {}


@functools.cache
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR / "tenant"))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def _record(db: Database) -> list[tuple[str, Any, bool]]:
    """The statements (with their parameters) that bring an empty tenant schema to the newest revision."""
    seen: list[tuple[str, Any, bool]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        seen.append((statement, params, executemany))

    with db.engine.connect() as conn:
        with conn.begin() as outer:
            conn.execute(CreateSchema(TEMPLATE_SCHEMA))
            event.listen(conn, "before_cursor_execute", record)
            try:
                translated = conn.execution_options(schema_translate_map={TENANT_SCHEMA: TEMPLATE_SCHEMA})
                command.upgrade(_config("tenant", translated, TEMPLATE_SCHEMA, db.settings), "head")
            finally:
                event.remove(conn, "before_cursor_execute", record)
            outer.rollback()
    return seen


def _swap(value: Any, schema: str) -> Any:
    if isinstance(value, str):
        return value.replace(TEMPLATE_SCHEMA, schema)
    if isinstance(value, dict):
        return {k: _swap(v, schema) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_swap(v, schema) for v in value)
    return value


def _script(statements: list[tuple[str, Any, bool]], schema: str, conn: Any) -> str:
    """The recorded writes as one script for `schema` (one round trip, not ~50); the recorded reads
    (alembic's and the data migrations' look-ups, which find nothing in an empty schema) are left out."""
    from psycopg import ClientCursor

    render = ClientCursor(conn.connection.dbapi_connection)
    parts = []
    for statement, params, many in statements:
        if statement.lstrip().upper().startswith("SELECT"):
            continue
        for one in (params if many else [params]):
            parts.append(render.mogrify(_swap(statement, schema), _swap(one, schema) or None))
    return ";\n".join(parts)


def create_tenant_schema(db: Database, slug: str) -> None:
    """A new tenant's schema at the newest revision: on PostgreSQL by replaying the recorded
    migrations (see above), on SQLite (or if the replay does not reach the newest revision) by alembic."""
    schema = schema_for(slug)
    if db.is_sqlite:
        if not _copy_sqlite_template(db, slug):
            upgrade_tenant(db, slug)
        return
    statements = _recorded.get(db.url)
    if statements is None:
        statements = _recorded[db.url] = _record(db)
    version = Table("alembic_version", MetaData(), Column("version_num", String(32)), schema=schema)
    try:
        with db.engine.connect() as conn:
            met_schema(conn, schema)  # named in the replayed script's text
            with conn.begin():
                conn.execute(CreateSchema(schema))  # a half-made schema left by a crash: alembic below
                conn.connection.dbapi_connection.cursor().execute(  # type: ignore[union-attr]
                    _script(statements, schema, conn))  # as it is: no parameters, nothing to escape
                if conn.execute(select(version.c.version_num)).scalar() != head_revision():
                    raise RuntimeError("the replayed migrations did not reach the newest revision")
        return
    except Exception:
        log.warning("tenant.template_failed", extra={"event": "tenant.template_failed", "tenant": slug},
                    exc_info=True)
    upgrade_tenant(db, slug)


# -- a new tenant from a template file (SQLite) ------------------------------------------------
#
# On SQLite a tenant is a file of its own, and a new one migrated by alembic is always the same
# file whatever the slug (SQLite keeps no schema name in it; no tenant migration writes rows).
# So alembic makes it once a process, in a throwaway folder, and each new tenant starts as a copy
# (~5 ms, against ~65 ms of alembic). Linked into place, never over an existing file: a half-made
# tenant left by a crash is alembic's to finish, as is a copy that is not at the newest revision.

_sqlite_templates: dict[str, bytes] = {}


def _sqlite_template(db: Database) -> bytes:
    head = head_revision()
    data = _sqlite_templates.get(head)
    if data is None:
        with tempfile.TemporaryDirectory(prefix="almanac-tenant-template-") as folder:
            settings = db.settings.model_copy(update={"database_url": f"sqlite:///{folder}/shared.db",
                                                      "var_dir": Path(folder)})
            template = Database(settings)
            try:
                upgrade_tenant(template, "template")
            finally:
                template.dispose()  # the last connection closes: the WAL is folded into the file
            data = _sqlite_templates[head] = template.tenant_file("template").read_bytes()
    return data


def _copy_sqlite_template(db: Database, slug: str) -> bool:
    """Whether `slug`'s file was made from the template (False: alembic is to make or finish it)."""
    path = db.tenant_file(slug)
    if path.exists():
        return False
    staged = path.with_name(f".{slug}.{os.getpid()}.{threading.get_ident()}.new")  # this thread's own
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # a tenant's data: the server user's alone
    with os.fdopen(fd, "wb") as handle:
        handle.write(_sqlite_template(db))
    try:
        os.link(staged, path)
    except OSError:  # there already (another process made it), or a file system without links
        return False
    finally:
        staged.unlink(missing_ok=True)
    return tenant_revision(db, slug) == head_revision()


def drop_tenant_schema(db: Database, slug: str) -> None:
    """Remove a tenant's schema entirely (used to undo a half-made tenant)."""
    schema = schema_for(slug)
    if db.is_sqlite:
        db.engine.dispose()  # pooled connections may hold the file attached
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(db.tenant_file(slug)) + suffix).unlink(missing_ok=True)
        return
    # The shared due index, turns and delivery signals (almanac.platform.store.coordination_models.DueEntry
    # and TenantTurn, almanac.delivery.models.DeliverySignal; tenants may not import either package).
    shared = [Table(name, MetaData(), Column("tenant_slug", String(40)))
              for name in ("due_index", "tenant_turns", "delivery_signals")]
    with db.engine.begin() as conn:
        conn.execute(DropSchema(schema, cascade=True, if_exists=True))
        # Its triggers went with the schema; its shared rows go in the same transaction.
        for table in shared:
            conn.execute(delete(table).where(table.c.tenant_slug == slug))


def tenant_revision(db: Database, slug: str) -> str | None:
    with db.tenant_connection(slug) as conn:
        version = Table("alembic_version", MetaData(), Column("version_num", String(32)), schema=TENANT_SCHEMA)
        row = conn.execute(select(version.c.version_num)).first()
        return row[0] if row else None
