"""A tenant's rows as plain tuples, to compare what two code paths wrote (PostgreSQL tests)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from almanac.db import Database
from almanac.platform.store.models import KV, Event, Job, Occurrence, Run, Schedule

WRITTEN_BY_A_RUN = {"runs": Run, "occurrences": Occurrence, "jobs": Job, "schedules": Schedule, "events": Event,
                    "kv": KV}


def snapshot(database: Database, slug: str, tables: dict[str, Any] = WRITTEN_BY_A_RUN) -> dict[str, Any]:
    """Every row of `tables` in the tenant (lease tokens left out: random per claim), and its due-index rows."""
    out: dict[str, Any] = {}
    with database.tenant_session(slug) as s:
        for name, model in tables.items():
            t = model.__table__
            cols = [c for c in t.c if c.name != "lease_token"]
            out[name] = [tuple(r) for r in s.execute(select(*cols).order_by(*t.primary_key.columns))]
    with database.engine.connect() as conn:
        out["due_index"] = [tuple(r) for r in conn.execute(text(
            "SELECT occurrence_id, due_at, priority FROM due_index WHERE tenant_slug = :s ORDER BY occurrence_id"),
            {"s": slug})]
    return out
