"""PostgreSQL: the tenant's functions as `_v2`, from `.sql` files, and its triggers calling the `_v2` ones.

The claim's reads and writes, the record of plain runs and the pending-jobs trigger function get
versioned names, with the bodies of t0017 and t0020-t0022, installed from the frozen copies in
`almanac/migrations/sql/t0025/` (the current state is `almanac/platform/store/sql/tenant/`). The
tenant's triggers are replaced (`CREATE OR REPLACE TRIGGER`, same names and conditions) by ones
calling the `_v2` trigger functions (shared revision s0013). The unversioned functions stay for
the workers of the previous release during a rolling deploy, until a later revision drops them
(docs/decisions/0230-sql-in-sql-files.md). On SQLite nothing happens.

Revision ID: t0025_sql_functions_v2
Revises: t0024_ids_never_reused
"""

from alembic import op

from almanac.migrations.pg_names import FROZEN, install_frozen, tenant_names

revision = "t0025_sql_functions_v2"
down_revision = "t0024_ids_never_reused"
branch_labels = None
depends_on = None

FUNCTIONS = ("almanac_claim_writes_v2", "almanac_record_plain_v2", "almanac_claim_reads_v2",
             "almanac_pending_jobs_changed_v2")
# The trigger functions the triggers called before this revision, for the downgrade.
_BEFORE = {"almanac_due_index_v2()": "almanac_due_index()",
           "almanac_due_index_inserted_v2()": "almanac_due_index_inserted()",
           "almanac_delivery_signal_v2()": "almanac_delivery_signal()",
           "almanac_pending_jobs_changed_v2()": "almanac_pending_jobs_changed()"}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    for name in FUNCTIONS:
        install_frozen("t0025", name, tenant=schema)
    install_frozen("t0025", "triggers", tenant=schema, shared=shared)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    text = (FROZEN / "t0025" / "triggers.sql").read_text().replace("{tenant}", schema).replace("{shared}", shared)
    for new, old in _BEFORE.items():
        text = text.replace(new, old)
    for statement in text.split("\n;\n"):
        if "CREATE" in statement:
            op.execute(statement)
    for name in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {schema}.{name}")
