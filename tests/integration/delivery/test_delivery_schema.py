"""The delivery migration makes exactly the tables of almanac/delivery/models.py."""

from __future__ import annotations

from typing import Any, Callable

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import BLANK_SCHEMA, MetaData, create_engine

from almanac.db import TenantBase
from almanac.delivery import models

TABLES = {m.__table__.name for m in (models.Target, models.EventFanout, models.Delivery, models.DeliveryAttempt)}


def test_migration_matches_models(sqlite_settings: Any, tmp_path: Any) -> None:
    from almanac.db import Database
    from almanac.tenants import migrations, registry
    from datetime import datetime, timezone

    db = Database(sqlite_settings)
    migrations.upgrade_shared(db)
    registry.create_tenant(db, "schema-check", admin_email="a@schema.test", admin_password="correct-horse-battery",
                           name="S", min_interval_seconds=60, now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    wanted = MetaData(naming_convention=TenantBase.metadata.naming_convention)
    for name in TABLES:
        TenantBase.metadata.tables[f"tenant.{name}"].to_metadata(
            wanted, schema=None, referred_schema_fn=lambda *args: BLANK_SCHEMA)
    engine = create_engine(f"sqlite:///{db.tenant_file('schema-check')}")
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": _only(TABLES), "compare_type": True})
        diff = compare_metadata(context, wanted)
    engine.dispose()
    db.dispose()
    assert diff == []


def _only(names: set[str]) -> Callable[..., bool]:
    def include(name: str | None, type_: str, parent: Any) -> bool:
        return type_ != "table" or name in names

    return include
