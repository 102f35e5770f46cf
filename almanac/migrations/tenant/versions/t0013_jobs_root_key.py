"""An index on jobs.root_key: the chain limit counts a chain's jobs each time one of them plans another.

Revision ID: t0013_jobs_root_key
Revises: t0007_operating
"""

from alembic import op

revision = "t0013_jobs_root_key"
down_revision = "t0007_operating"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_root_key", "jobs", ["root_key"], schema="tenant")


def downgrade() -> None:
    op.drop_index("ix_jobs_root_key", table_name="jobs", schema="tenant")
