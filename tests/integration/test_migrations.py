"""The migrations produce exactly the models' schema (shared and tenant), on both backends, and (PostgreSQL)
exactly the functions and triggers of the current `.sql` files (`almanac/platform/store/sql/`)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, text
from sqlalchemy.schema import CreateSchema

import almanac
from almanac.db import Database, SharedBase, TenantBase, schema_for
from almanac.platform.store.sql import FOLDER, INSTALLED
from almanac.tenants.migrations import _config, upgrade_tenant


def _import_all_models() -> None:
    """Every module that declares tables must be imported before comparing."""
    for info in pkgutil.walk_packages(almanac.__path__, "almanac."):
        if info.name.endswith(".models"):
            importlib.import_module(info.name)


def _diff(conn: Any, metadata: Any, **opts: Any) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True, **opts})
    return compare_metadata(context, metadata)


def test_shared_schema_matches_models(database: Database) -> None:
    _import_all_models()
    with database.engine.connect() as conn:
        diffs = [d for d in _diff(conn, SharedBase.metadata) if not _is_foreign(d)]
    assert diffs == []


def test_tenant_schema_matches_models(database: Database, make_tenant: Callable[..., str]) -> None:
    _import_all_models()
    slug = make_tenant()
    schema = schema_for(slug)
    # compare_metadata does not apply schema_translate_map: compare against a copy in the real schema.
    real = MetaData()
    for table in TenantBase.metadata.tables.values():
        table.to_metadata(real, schema=schema)
    with database.tenant_connection(slug) as conn:
        diffs = _diff(
            conn, real, include_schemas=True,
            include_name=lambda name, type_, parent: type_ != "schema" or name == schema,
        )
    assert [d for d in diffs if not _is_foreign(d)] == []


def _is_foreign(diff: Any) -> bool:
    """Ignore tables of the other tree, alembic's own version table, and PostgreSQL's kept count of
    pending jobs (t0017: a table of triggers, read through `quotas.PENDING_JOB_COUNTS`, no model)."""
    text = repr(diff)
    return "alembic_version" in text or "Table('pending_job_counts'" in text


# -- functions and triggers (PostgreSQL) ----------------------------------------------------------

# Older versions a migrated database still has, for the workers of the previous release during a
# rolling deploy; dropped by a later revision (docs/decisions/0230-sql-in-sql-files.md).
_OLDER_TENANT = {"almanac_claim_writes", "almanac_record_plain", "almanac_claim_reads", "almanac_pending_jobs_changed"}
_OLDER_SHARED = {"almanac_due_index", "almanac_due_index_inserted", "almanac_delivery_signal",
                 "almanac_due_index_moved"}

_FUNCTIONS = text("SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p "
                  "JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = :schema")
_TRIGGERS = text("SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger AS t JOIN pg_class AS c "
                 "ON c.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                 "WHERE n.nspname = :schema AND NOT t.tgisinternal")


def _defined(conn: Any, query: Any, schema: str, names: dict[str, str]) -> dict[str, str]:
    """name -> definition in `schema`, each schema name in `names` replaced by its placeholder."""
    out = {}
    for name, definition in conn.execute(query, {"schema": schema}):
        for real, placeholder in names.items():
            definition = definition.replace(f"{real}.", placeholder)
        # a trigger's function in the search path (the shared schema) is shown unqualified
        out[name] = definition.replace("EXECUTE FUNCTION almanac_", "EXECUTE FUNCTION {shared}.almanac_")
    return out


def _install_current(database: Database, tenant: str, shared: str) -> None:
    """The current `.sql` files into two fresh schemas, the tenant's tables made by the models."""
    _import_all_models()
    with database.engine.begin() as conn:
        for schema in (tenant, shared):
            conn.execute(CreateSchema(schema))
        TenantBase.metadata.create_all(conn.execution_options(schema_translate_map={"tenant": tenant}))
        for path in sorted(path for tree in INSTALLED for path in (FOLDER / tree).glob("*.sql")):
            # unquoted, as the migrations' quoting leaves such names
            body = path.read_text().replace("{tenant}", tenant).replace("{shared}", shared)
            for statement in body.split("\n;\n"):
                if any(line.strip() and not line.lstrip().startswith("--") for line in statement.splitlines()):
                    conn.exec_driver_sql(statement)


def test_migrated_functions_and_triggers_are_the_current_sql_files(pg: Database,
                                                                   make_tenant: Callable[..., str]) -> None:
    """Every function and trigger the migrations leave is the current `.sql` files' (or a kept older version)."""
    slug = make_tenant()
    _install_current(pg, "cur_tenant", "cur_shared")
    with pg.engine.connect() as conn:
        shared = conn.execute(text("SELECT current_schema()")).scalar_one()
        names = {schema_for(slug): "{tenant}.", shared: "{shared}.", "cur_tenant": "{tenant}.",
                 "cur_shared": "{shared}."}
        for query, migrated_schema, current_schema, older in (
                (_FUNCTIONS, schema_for(slug), "cur_tenant", _OLDER_TENANT),
                (_FUNCTIONS, shared, "cur_shared", _OLDER_SHARED),
                (_TRIGGERS, schema_for(slug), "cur_tenant", set())):
            migrated = _defined(conn, query, migrated_schema, names)
            current = _defined(conn, query, current_schema, names)
            assert set(migrated) == set(current) | older, migrated_schema
            assert {n: migrated[n] for n in current} == current


def test_the_versioned_functions_go_down_to_the_unversioned_triggers_and_back(
        pg: Database, make_tenant: Callable[..., str]) -> None:
    """t0025's downgrade points the tenant's triggers back at the unversioned functions, and drops its own."""
    slug = make_tenant()
    schema = schema_for(slug)

    def called() -> set[str]:
        with pg.engine.connect() as conn:
            return {d.rsplit("EXECUTE FUNCTION ", 1)[1] for d in _defined(conn, _TRIGGERS, schema, {}).values()}

    assert called() == {"{shared}.almanac_due_index_v2()", "{shared}.almanac_due_index_inserted_v2()",
                        "{shared}.almanac_delivery_signal_v2()", f"{schema}.almanac_pending_jobs_changed_v2()"}
    with pg.tenant_connection(slug) as conn:
        command.downgrade(_config("tenant", conn, schema, pg.settings), "t0024_ids_never_reused")
        conn.commit()
    assert called() == {"{shared}.almanac_due_index()", "{shared}.almanac_due_index_inserted()",
                        "{shared}.almanac_delivery_signal()", f"{schema}.almanac_pending_jobs_changed()"}
    upgrade_tenant(pg, slug)
    assert {c.removesuffix("_v2()") for c in called()} == {
        "{shared}.almanac_due_index", "{shared}.almanac_due_index_inserted", "{shared}.almanac_delivery_signal",
        f"{schema}.almanac_pending_jobs_changed"}
