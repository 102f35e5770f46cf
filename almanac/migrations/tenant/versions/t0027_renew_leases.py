"""PostgreSQL: the tenant's renewal of many leases as one function, `almanac_renew_leases_v1`.

A process renews the leases of the claims it holds every round, across tenants in one
statement (`due_index.record.renew_leases`), each tenant's part one call of this function,
installed from the frozen copy in `almanac/migrations/sql/t0027/` (the current state is
`almanac/platform/store/sql/tenant/`). On SQLite nothing happens.

Revision ID: t0027_renew_leases
Revises: t0026_calendars
"""

from alembic import op

from almanac.migrations.pg_names import install_frozen, tenant_names

revision = "t0027_renew_leases"
down_revision = "t0026_calendars"
branch_labels = None
depends_on = None

FUNCTIONS = ("almanac_renew_leases_v1",)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    for name in FUNCTIONS:
        install_frozen("t0027", name, tenant=schema)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    for name in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {schema}.{name}")
