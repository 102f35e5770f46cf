"""The migrations produce exactly the models' schema (shared and tenant), on both backends."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData

import almanac
from almanac.db import Database, SharedBase, TenantBase, schema_for


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
