"""Scripts reach the outside world: the egress allowlist, encrypted secrets, each run's `http` record;
webhook signing secrets are encrypted under the same key (existing rows too).

Revision ID: t0009_egress_secrets
Revises: t0008_run_record
"""

import sqlalchemy as sa
from alembic import context, op

from almanac.db import UTCDateTime
from almanac.settings import get_settings
from almanac.vault import keyring

revision = "t0009_egress_secrets"
down_revision = "t0008_run_record"
branch_labels = None
depends_on = None


def _schema() -> str:
    # ALTER TABLE is not translated by the connection's schema map: name the tenant's real schema.
    return context.config.attributes["schema"]


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        "egress_hosts",
        sa.Column("entry", sa.String(length=300), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("entry", name=op.f("pk_egress_hosts")),
        schema=schema,
    )
    op.create_table(
        "secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_secrets")),
        schema=schema,
    )
    op.add_column("runs", sa.Column("http", sa.Text(), nullable=True), schema=schema)
    with op.batch_alter_table("targets", schema=schema) as batch:
        batch.alter_column("secret", existing_type=sa.String(length=100), type_=sa.String(length=500))
    _encrypt_webhook_secrets(schema)


def _encrypt_webhook_secrets(schema: str) -> None:
    """Existing plain `whsec_…` values become `fernet:…` (the key file is made only if there are any)."""
    conn = op.get_bind()
    targets = sa.table("targets", sa.column("id", sa.Integer), sa.column("secret", sa.String), schema=schema)
    rows = conn.execute(sa.select(targets.c.id, targets.c.secret).where(targets.c.secret.is_not(None))).all()
    plain = [(i, s) for i, s in rows if not s.startswith("fernet:")]
    if not plain:
        return
    ring = keyring.for_settings(context.config.attributes.get("settings") or get_settings())
    for target_id, secret in plain:
        conn.execute(targets.update().where(targets.c.id == target_id).values(secret=ring.encrypt(secret)))


def downgrade() -> None:
    schema = _schema()
    op.drop_column("runs", "http", schema=schema)
    op.drop_table("secrets", schema=schema)
    op.drop_table("egress_hosts", schema=schema)
