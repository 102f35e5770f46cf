"""Shared schema (PostgreSQL): the due index's and the delivery signals' functions as `_v2`, from `.sql` files.

The same bodies as s0007-s0011 under versioned names, installed from the frozen copies in
`almanac/migrations/sql/s0013/` (the current state is `almanac/platform/store/sql/shared/`). The
tenants' triggers move to them in tenant revision t0025; `almanac_due_index_moved_v2` is what
this release's workers call. The unversioned functions stay for the workers of the previous
release, still running during a rolling deploy, until a later revision drops them
(docs/decisions/0230-sql-in-sql-files.md).

Revision ID: s0013_sql_functions_v2
Revises: s0012_ids_never_reused
"""

from alembic import op

from almanac.migrations.pg_names import install_frozen, shared_schema

revision = "s0013_sql_functions_v2"
down_revision = "s0012_ids_never_reused"
branch_labels = None
depends_on = None

FUNCTIONS = ("almanac_due_index_v2", "almanac_due_index_inserted_v2", "almanac_delivery_signal_v2",
             "almanac_due_index_moved_v2")
SIGNATURES = ("almanac_due_index_v2()", "almanac_due_index_inserted_v2()", "almanac_delivery_signal_v2()",
              "almanac_due_index_moved_v2(varchar[], integer[], timestamptz[], integer[])")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    shared = shared_schema()
    for name in FUNCTIONS:
        install_frozen("s0013", name, shared=shared)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    shared = shared_schema()
    for signature in SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {shared}.{signature}")
