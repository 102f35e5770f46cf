"""Delivery tables, per tenant: targets, the fan-out marker of each event, deliveries, attempts.

- `targets`: where a tenant's events go (webhook or e-mail) and which topics.
- `event_fanouts`: one row per event that has been turned into deliveries (even into none), so
  the dispatcher finds new events with an anti-join, and the event's public id (`evt_…`, a
  UUID: stable across retries, unique across tenants) is fixed once.
- `deliveries`: one per (event, target), unique, so a fan-out that runs twice adds nothing.
  `next_attempt_at` is "when this row next needs the dispatcher": the next try while pending or
  failed, the lease end while delivering, NULL once succeeded or dead; one index on it finds all
  due work.
- `delivery_attempts`: every try, with its outcome, status code, latency and error excerpt.

Written to match almanac/migrations/tenant/versions/t0003_delivery.py exactly.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Identity, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from almanac.db import IDS_NEVER_REUSED, SharedBase, TenantBase, UTCDateTime

WEBHOOK, EMAIL = "webhook", "email"
KINDS = (WEBHOOK, EMAIL)
PENDING, DELIVERING, SUCCEEDED, FAILED, DEAD = "pending", "delivering", "succeeded", "failed", "dead"
STATUSES = (PENDING, DELIVERING, SUCCEEDED, FAILED, DEAD)
# Not finished: a delivery in one of these holds back later events of its target and schedule.
OPEN = (PENDING, DELIVERING, FAILED)

NAME_MAX = 200
ORDER_KEY_MAX = 220
ERROR_MAX = 500


class Target(TenantBase):
    __tablename__ = "targets"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    url: Mapped[str | None] = mapped_column(String(2048))
    # Stored as is (no encryption library in the dependencies); shown to the admin only at creation.
    secret: Mapped[str | None] = mapped_column(String(500))  # encrypted: almanac.vault.keyring
    recipients: Mapped[str | None] = mapped_column(Text)  # JSON list of addresses
    topics: Mapped[str] = mapped_column(Text)  # JSON list of patterns ("order.*", "*")
    subject_template: Mapped[str | None] = mapped_column(Text)
    body_template: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class EventFanout(TenantBase):
    __tablename__ = "event_fanouts"
    __table_args__ = IDS_NEVER_REUSED

    event_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    schedule_id: Mapped[int | None] = mapped_column(Integer)
    job_key: Mapped[str | None] = mapped_column(String(NAME_MAX))
    fanned_out_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Delivery(TenantBase):
    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "target_id"),
        Index("ix_deliveries_next_attempt_at", "next_attempt_at"),
        Index("ix_deliveries_target_id_order_key_event_id", "target_id", "order_key", "event_id"),
        Index("ix_deliveries_status_id", "status", "id"),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[int] = mapped_column(Integer)
    target_id: Mapped[int] = mapped_column(Integer, ForeignKey("tenant.targets.id", ondelete="CASCADE"))
    # Events of one schedule (or job, or manual run) reach one target in order: see fanout.order_key.
    order_key: Mapped[str] = mapped_column(String(ORDER_KEY_MAX))
    status: Mapped[str] = mapped_column(String(12))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    lease_token: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(ERROR_MAX))
    last_latency_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DeliveryAttempt(TenantBase):
    __tablename__ = "delivery_attempts"
    __table_args__ = (Index("ix_delivery_attempts_delivery_id_id", "delivery_id", "id"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(Integer, ForeignKey("tenant.deliveries.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    outcome: Mapped[str] = mapped_column(String(12))  # succeeded | failed
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(ERROR_MAX))


class DeliverySignal(SharedBase):
    """(Shared schema, PostgreSQL) A tenant may have delivery work from `at`: written by triggers on its
    `events` and `deliveries` (migrations s0008 / t0015), taken by the dispatchers (`signals`)."""

    __tablename__ = "delivery_signals"
    __table_args__ = (Index("ix_delivery_signals_at", "at"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant_slug: Mapped[str] = mapped_column(String(40))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
