"""Shared-schema tables through which scheduler processes share the work without a coordinator.

- `worker_heartbeats`: one row per live process (`almanac worker` or `almanac serve`
  with its scheduler), refreshed every few seconds. The processes whose heartbeat
  has not expired are the live ones; each takes about `ceil(tenants / live)`.
- `tenant_turns`: when each tenant's due rows were last claimed by any process (PostgreSQL): the
  pick across tenants serves the tenants served least recently first (`due_index.claim`).
- `timer.tenant_leases`: which process runs the timer of which tenant, until when. A row
  is taken by compare-and-set (`FOR UPDATE SKIP LOCKED` on PostgreSQL) when it is
  free or its lease lapsed, renewed by its owner, and released when the owner
  holds more than its share. A process that dies simply stops renewing.

Times here are the database's own clock (`now()` on PostgreSQL), so that
processes on different machines agree on whose lease lapsed. These leases only
decide who *looks* at a tenant: two processes briefly ticking the same tenant
is harmless, because occurrences are still claimed one by one with
`FOR UPDATE SKIP LOCKED`, a compare-and-set and a lease token of their own.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from almanac.db import SharedBase, UTCDateTime

OWNER_MAX = 100
TOKEN_MAX = 32


class WorkerHeartbeat(SharedBase):
    __tablename__ = "worker_heartbeats"

    owner: Mapped[str] = mapped_column(String(OWNER_MAX), primary_key=True)  # host:pid:random
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class TimerLease(SharedBase):
    __tablename__ = "timer_leases"
    __table_args__ = (Index("ix_timer_leases_owner", "owner"),)

    tenant_slug: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(OWNER_MAX))
    token: Mapped[str | None] = mapped_column(String(TOKEN_MAX))  # changes with every hand-over
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class DueEntry(SharedBase):
    """The cross-tenant due index (PostgreSQL): one row per occurrence of any tenant whose `due_at` is set.

    A mirror of `occurrences.due_at` (and `priority`) kept by a trigger on every tenant's
    `occurrences` table (migrations s0007_due_index and t0014_due_index), so it changes in the
    very transaction that plans, claims, renews, finishes or cancels the occurrence, whichever
    code path writes it. Every process claims from it with one indexed query across all tenants
    (`due_index.claim`), locking its rows `FOR UPDATE SKIP LOCKED`; the occurrences, runs and data stay
    in the tenant's schema. Unused on SQLite (a tenant there is a file of its own: no trigger can
    reach the shared file), where the timer still looks at each tenant.
    """

    __tablename__ = "due_index"
    __table_args__ = (Index("ix_due_index_due_at", "due_at"),)

    tenant_slug: Mapped[str] = mapped_column(String(40), primary_key=True)
    occurrence_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    priority: Mapped[int] = mapped_column(Integer)


class TenantTurn(SharedBase):
    """When a claim pass of any process last claimed this tenant's due rows (PostgreSQL; unused on SQLite).

    The pick across tenants (`due_index.claim`) takes, within each round of its round robin, the
    tenants served least recently first: a claimed row is no longer due, so every pass of a burst
    meets every tenant in its first round again, and without this memory which tenants a pass
    reached was a fresh draw each time. Written by the pass that claimed, with the database's clock.
    """

    __tablename__ = "tenant_turns"

    tenant_slug: Mapped[str] = mapped_column(String(40), primary_key=True)
    served_at: Mapped[datetime] = mapped_column(UTCDateTime())
