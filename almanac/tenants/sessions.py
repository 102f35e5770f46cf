"""Browser sessions kept on the server (SPEC section 3).

The cookie carries only a random id (256 bits); the row is keyed by its SHA-256, so a copy of
the table does not hold usable cookies. Ending a session deletes its row: a copied cookie stops
working at once. Pure functions of (database session, now); the web layer owns the cookie.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.orm import Session

from almanac.tenants.models import WebSession

# A signed-in session lasts a working day; a visitor's (only a CSRF token for the sign-in form) less.
SIGNED_IN_LIFETIME = timedelta(hours=12)
ANONYMOUS_LIFETIME = timedelta(hours=2)
TOKEN_MAX = 100
USER_KEY = "uid"


@dataclass(frozen=True)
class Loaded:
    id_hash: str
    data: dict[str, Any]


def hash_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load(session: Session, token: str | None, *, now: datetime) -> Loaded | None:
    """The live session behind a cookie value, or None (unknown, ended or expired)."""
    if not token or len(token) > TOKEN_MAX:
        return None
    row = session.get(WebSession, hash_id(token))
    if row is None or row.expires_at <= now:
        return None
    try:
        data = json.loads(row.data)
    except ValueError:
        return None
    return Loaded(row.id_hash, data if isinstance(data, dict) else {})


def create(session: Session, data: dict[str, Any], *, now: datetime) -> str:
    """A new session holding `data`; returns the cookie value (shown to the browser only)."""
    session.execute(delete(WebSession).where(WebSession.expires_at <= now))  # keep the table small
    token = secrets.token_urlsafe(32)
    lifetime = SIGNED_IN_LIFETIME if data.get(USER_KEY) else ANONYMOUS_LIFETIME
    session.add(WebSession(id_hash=hash_id(token), user_id=_user_id(data), data=json.dumps(data),
                           created_at=now, expires_at=now + lifetime))
    return token


def save(session: Session, id_hash: str, data: dict[str, Any], *, now: datetime) -> None:
    row = session.get(WebSession, id_hash)
    if row is None:
        return  # ended meanwhile (signed out elsewhere): do not bring it back
    if row.user_id is None and _user_id(data) is not None:
        row.expires_at = now + SIGNED_IN_LIFETIME
    row.user_id = _user_id(data)
    row.data = json.dumps(data)


def end(session: Session, id_hash: str) -> None:
    session.execute(delete(WebSession).where(WebSession.id_hash == id_hash))


def end_users_sessions(session: Session, user_id: int, *, keep: str | None = None) -> int:
    """End every session of a person (but `keep`, the one asking); returns how many ended."""
    query = delete(WebSession).where(WebSession.user_id == user_id)
    if keep is not None:
        query = query.where(WebSession.id_hash != keep)
    result = session.execute(query)
    assert isinstance(result, CursorResult)  # a DELETE's result; Session.execute is typed as any Result
    return result.rowcount or 0


def count_for(session: Session, user_id: int) -> int:
    return len(session.scalars(select(WebSession.id_hash).where(WebSession.user_id == user_id)).all())


def _user_id(data: dict[str, Any]) -> int | None:
    value = data.get(USER_KEY)
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None
