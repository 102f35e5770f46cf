"""SQLite: the shared tables keyed by an integer id become AUTOINCREMENT (ids are never given again).

See `almanac.migrations.sqlite_rebuild`. On PostgreSQL nothing happens.

Revision ID: s0012_ids_never_reused
Revises: s0011_due_index_moved
"""

from almanac.migrations.sqlite_rebuild import make_autoincrement

revision = "s0012_ids_never_reused"
down_revision = "s0011_due_index_moved"
branch_labels = None
depends_on = None

TABLES = ("tenants", "users", "memberships", "api_tokens", "invitations", "audit_entries")


def upgrade() -> None:
    make_autoincrement(TABLES, None)


def downgrade() -> None:
    pass  # AUTOINCREMENT only keeps ids from coming back: nothing to undo
