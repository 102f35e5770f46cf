"""SQLite: the tenant's tables keyed by an integer id become AUTOINCREMENT (ids are never given again).

See `almanac.migrations.sqlite_rebuild`. On PostgreSQL nothing happens.

Revision ID: t0024_ids_never_reused
Revises: t0023_pending_jobs_held
"""

from alembic import context

from almanac.migrations.sqlite_rebuild import make_autoincrement

revision = "t0024_ids_never_reused"
down_revision = "t0023_pending_jobs_held"
branch_labels = None
depends_on = None

TABLES = ("scripts", "script_versions", "events", "schedules", "jobs", "occurrences", "runs",
          "targets", "event_fanouts", "deliveries", "delivery_attempts")


def upgrade() -> None:
    # The batch copy is made by SQL of its own (not translated by the connection's schema map):
    # name the tenant's real schema, as t0009 does.
    make_autoincrement(TABLES, context.config.attributes["schema"])


def downgrade() -> None:
    pass  # AUTOINCREMENT only keeps ids from coming back: nothing to undo
