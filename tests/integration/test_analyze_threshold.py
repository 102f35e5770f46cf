"""PostgreSQL: a tenant's busiest tables are analyzed late, at a threshold of the tenant's own (t0018).

With autovacuum's default (50 rows + 10 %), a burst of a few dozen runs a tenant over a
thousand tenants set off thousands of ANALYZEs at once, and the next burst drained 2-6 times
slower (docs/decisions/0011-analyze-later.md). Both ways a tenant gets its tables must set it: the
replay of the recorded migrations (a new tenant) and alembic (`almanac migrate`).
"""

from __future__ import annotations

from collections.abc import Callable

from alembic import command
from sqlalchemy import text

from almanac.db import Database, schema_for
from almanac.migrations.tenant.versions import t0018_analyze_later as t0018
from almanac.tenants import migrations

_THRESHOLDS = text("""
SELECT c.relname, option_value FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
       pg_options_to_table(c.reloptions)
WHERE n.nspname = :schema AND option_name = 'autovacuum_analyze_threshold'
""")


def _thresholds(database: Database, slug: str) -> dict[str, int]:
    with database.engine.connect() as conn:
        return {name: int(value) for name, value in conn.execute(_THRESHOLDS, {"schema": schema_for(slug)})}


def _from_name(database: Database, slug: str) -> int:
    with database.engine.connect() as conn:
        return conn.execute(text("SELECT :base + mod(hashtext(:name)::bigint + 2147483648, :spread)"),
                            {"base": t0018.THRESHOLD_FROM, "name": schema_for(slug),
                             "spread": t0018.THRESHOLD_SPREAD}).scalar_one()


def test_a_new_tenant_s_busy_tables_are_analyzed_late_at_a_threshold_of_its_own(
        pg: Database, make_tenant: Callable[..., str]) -> None:
    first, second = make_tenant("acme"), make_tenant("globex")
    a, b = _thresholds(pg, first), _thresholds(pg, second)
    assert set(a) == set(b) == set(t0018.TABLES)
    for thresholds in (a, b):
        (value,) = set(thresholds.values())  # the same for each of a tenant's tables
        assert t0018.THRESHOLD_FROM <= value < t0018.THRESHOLD_FROM + t0018.THRESHOLD_SPREAD
    assert a["runs"] != b["runs"], "two tenants reach their thresholds at different counts"
    for slug, thresholds in ((first, a), (second, b)):  # fixed by the schema's name, not drawn
        assert thresholds["runs"] == _from_name(pg, slug)


def test_almanac_migrate_sets_the_same_threshold_on_an_existing_tenant(
        pg: Database, make_tenant: Callable[..., str]) -> None:
    slug = make_tenant("initech")
    made = _thresholds(pg, slug)
    with pg.tenant_connection(slug) as conn:
        command.downgrade(migrations._config("tenant", conn, schema_for(slug), pg.settings), "t0017_pending_job_counts")
        conn.commit()
    assert _thresholds(pg, slug) == {}
    migrations.upgrade_tenant(pg, slug)
    assert _thresholds(pg, slug) == made
