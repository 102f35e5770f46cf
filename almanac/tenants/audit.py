"""The audit log (SPEC section 14): who changed what in a tenant, when, from where.

`record` adds one row to the caller's session, so the entry commits (or rolls back) with the
change it describes. What changed is stored as JSON with secrets redacted (any key naming a
password, secret or token, and whatever the caller names) and long values shortened, so the
log never holds a secret nor grows with a script's source.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac import jsonsafe
from almanac.errors import ValidationError
from almanac.tenants.models import AuditEntry

REDACTED = "[redacted]"
_SECRET_WORDS = ("password", "secret", "token")
STRING_MAX = 200
ITEMS_MAX = 50
DEPTH_MAX = 4
CHANGES_MAX_BYTES = 4096
PAGE_MAX = 200


@dataclass(frozen=True)
class Actor:
    kind: str  # "person" or "token"
    name: str  # the person's email or the token's name
    id: int | None
    address: str | None


def record(session: Session, tenant_id: int, actor: Actor, action: str, *, target: str | None = None,
           changes: Any = None, redact: tuple[str, ...] = (), now: datetime) -> AuditEntry:
    entry = AuditEntry(**entry_values(tenant_id, actor, action, target=target, changes=changes, redact=redact,
                                      now=now))
    session.add(entry)
    return entry


def entry_values(tenant_id: int, actor: Actor, action: str, *, target: str | None = None, changes: Any = None,
                 redact: tuple[str, ...] = (), now: datetime) -> dict[str, Any]:
    """The columns of one entry (what `record` adds; a caller may insert them with Core instead)."""
    return dict(
        tenant_id=tenant_id, at=now, actor_kind=actor.kind, actor=actor.name[:320], actor_id=actor.id,
        address=(actor.address or None) and actor.address[:64], action=action[:64],
        target=target[:300] if target else None, changes=dump_changes(changes, redact),
    )


def dump_changes(changes: Any, redact: tuple[str, ...] = ()) -> str:
    cleaned = _clean(changes if changes is not None else {}, set(redact), 0)
    text = json.dumps(cleaned, ensure_ascii=False, sort_keys=True, default=str)
    if len(text.encode()) > CHANGES_MAX_BYTES:
        keys = sorted(cleaned)[:ITEMS_MAX] if isinstance(cleaned, dict) else []
        text = json.dumps({"_shortened": True, "fields": keys}, ensure_ascii=False)
    return text


def _clean(value: Any, redact: set[str], depth: int) -> Any:
    if isinstance(value, dict):
        if depth >= DEPTH_MAX:
            return f"[{len(value)} fields]"
        return {str(k): (REDACTED if _is_secret(str(k), redact) else _clean(v, redact, depth + 1))
                for k, v in list(value.items())[:ITEMS_MAX]}
    if isinstance(value, (list, tuple)):
        if depth >= DEPTH_MAX:
            return f"[{len(value)} items]"
        return [_clean(v, redact, depth + 1) for v in value[:ITEMS_MAX]]
    if isinstance(value, str):
        # Lone surrogates cannot be stored as UTF-8: replace them rather than fail the change.
        value = value.encode("utf-8", "replace").decode("utf-8")
        return value if len(value) <= STRING_MAX else f"{value[:STRING_MAX]}… ({len(value)} characters)"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)[:STRING_MAX]


def _is_secret(key: str, redact: set[str]) -> bool:
    lowered = key.lower()
    return key in redact or any(word in lowered for word in _SECRET_WORDS)


def encode_cursor(entry_id: int) -> str:
    return base64.urlsafe_b64encode(f"a{entry_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        number = jsonsafe.parse_id(text[1:]) if text.startswith("a") else None
        if number is None:  # not ours, or past any id the store holds (PostgreSQL would refuse it)
            raise ValueError(cursor)
        return number
    except ValueError:
        raise ValidationError("The cursor is not one this API gave out.", details={"field": "cursor"}) from None


def page(session: Session, tenant_id: int, *, since: datetime | None = None, actor: str | None = None,
         cursor: str | None = None, limit: int = 50) -> tuple[list[AuditEntry], str | None]:
    """Newest first; `next_cursor` continues after the last entry (keyset on id)."""
    limit = max(1, min(limit, PAGE_MAX))
    query = select(AuditEntry).where(AuditEntry.tenant_id == tenant_id)
    if since is not None:
        query = query.where(AuditEntry.at >= _utc(since))
    if actor:
        query = query.where(AuditEntry.actor == actor)
    if cursor:
        query = query.where(AuditEntry.id < decode_cursor(cursor))
    rows = list(session.scalars(query.order_by(AuditEntry.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1].id) if more and rows else None


def _utc(when: datetime) -> datetime:
    """A bound for the query: no offset means UTC; one that leaves the calendar is refused, not a 500."""
    try:
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ValidationError("since is out of range.", details={"field": "since"}) from None


def changes_of(entry: AuditEntry) -> Any:
    try:
        return json.loads(entry.changes)
    except ValueError:
        return {}
