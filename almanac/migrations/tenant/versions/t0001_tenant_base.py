"""Tenant schema base: the schema exists and carries its own version table.

Revision ID: t0001
Revises:
"""

revision = "t0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
