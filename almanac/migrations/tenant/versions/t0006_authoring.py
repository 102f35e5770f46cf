"""Script versions record who saved them (a person's email or a token's name).

Revision ID: t0006_authoring
Revises: t0003_delivery
"""

import sqlalchemy as sa
from alembic import context, op

revision = "t0006_authoring"
down_revision = "t0005_scheduling"
branch_labels = None
depends_on = None



def _schema() -> str:
    # ALTER TABLE is not rewritten by the connection's schema_translate_map: name the real schema.
    return context.config.attributes["schema"]


def upgrade() -> None:
    op.add_column("script_versions", sa.Column("author", sa.String(length=320), nullable=True), schema=_schema())


def downgrade() -> None:
    op.drop_column("script_versions", "author", schema=_schema())
