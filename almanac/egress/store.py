"""Reading and replacing a tenant's egress allowlist (the session is the tenant's own)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from almanac.egress import allowlist
from almanac.egress.models import EgressHost


def entries(session: Session) -> list[allowlist.Entry]:
    rows = session.execute(select(EgressHost.entry).order_by(EgressHost.position)).scalars()
    return [allowlist.parse_entry(text) for text in rows]


def hosts(session: Session) -> list[str]:
    return [str(entry) for entry in entries(session)]


def replace(session: Session, texts: object, *, now: datetime) -> list[str]:
    """Replace the whole allowlist (ValidationError, and nothing changed, if an entry is not one)."""
    parsed = allowlist.parse(texts)
    session.execute(delete(EgressHost))
    session.add_all(EgressHost(entry=str(e), position=i, updated_at=now) for i, e in enumerate(parsed))
    session.flush()
    return [str(e) for e in parsed]
