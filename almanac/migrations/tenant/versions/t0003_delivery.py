"""Delivery tables: targets, event fan-out markers, deliveries (unique per event and target),
and delivery attempts.

Written by hand to match almanac/delivery/models.py exactly.

Revision ID: t0003_delivery
Revises: t0002
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import UTCDateTime

revision = "t0003_delivery"
down_revision = "t0002"
branch_labels = None
depends_on = None

S = "tenant"


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.String(2048), nullable=True),
        sa.Column("secret", sa.String(100), nullable=True),
        sa.Column("recipients", sa.Text(), nullable=True),
        sa.Column("topics", sa.Text(), nullable=False),
        sa.Column("subject_template", sa.Text(), nullable=True),
        sa.Column("body_template", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_targets"),
        schema=S,
    )
    op.create_table(
        "event_fanouts",
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(40), nullable=False),
        sa.Column("schedule_id", sa.Integer(), nullable=True),
        sa.Column("job_key", sa.String(200), nullable=True),
        _ts("fanned_out_at"),
        sa.PrimaryKeyConstraint("event_id", name="pk_event_fanouts"),
        sa.UniqueConstraint("public_id", name="uq_event_fanouts_public_id"),
        schema=S,
    )
    _create_deliveries()


def _create_deliveries() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("order_key", sa.String(220), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _ts("next_attempt_at", nullable=True),
        sa.Column("lease_token", sa.String(32), nullable=True),
        _ts("lease_until", nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.Column("last_latency_ms", sa.Integer(), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.ForeignKeyConstraint(
            ["target_id"], [f"{S}.targets.id"], name="fk_deliveries_target_id_targets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.UniqueConstraint("event_id", "target_id", name="uq_deliveries_event_id_target_id"),
        schema=S,
    )
    op.create_index("ix_deliveries_next_attempt_at", "deliveries", ["next_attempt_at"], schema=S)
    op.create_index("ix_deliveries_target_id_order_key_event_id", "deliveries",
                    ["target_id", "order_key", "event_id"], schema=S)
    op.create_index("ix_deliveries_status_id", "deliveries", ["status", "id"], schema=S)
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        _ts("at"),
        sa.Column("outcome", sa.String(12), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(500), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"], [f"{S}.deliveries.id"], name="fk_delivery_attempts_delivery_id_deliveries",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_delivery_attempts"),
        schema=S,
    )
    op.create_index("ix_delivery_attempts_delivery_id_id", "delivery_attempts", ["delivery_id", "id"], schema=S)


def downgrade() -> None:
    for table in ("delivery_attempts", "deliveries", "event_fanouts", "targets"):
        op.drop_table(table, schema=S)
