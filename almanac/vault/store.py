"""A tenant's secrets (SPEC section 6): write-only through the API, readable by its scripts.

Values are encrypted before they reach the session and decrypted only for a run (`values`);
listing shows names and `updated_at`. NAME is `[A-Z][A-Z0-9_]{0,63}`, a value at most 8 KiB and
at least `VALUE_MIN` characters: a shorter value is found all over ordinary text, so redacting it
(`redact`, which replaces every value however short) would blank out "1" or "abc" in every log.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.errors import NotFound, ValidationError
from almanac.vault.keyring import Keyring
from almanac.vault.models import Secret

NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
VALUE_MAX = 8 * 1024
VALUE_MIN = 4
MAX_SECRETS = 1000


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValidationError("A secret's name is an upper-case letter then up to 63 of A-Z, 0-9 and _.")
    return name


def put(session: Session, keyring: Keyring, name: str, value: object, *, now: datetime) -> tuple[Secret, bool]:
    """Create or replace a secret; (row, created)."""
    check_name(name)
    if not isinstance(value, str) or not value or len(value.encode("utf-8", "surrogatepass")) > VALUE_MAX:
        raise ValidationError(f"A secret's value is a non-empty string of at most {VALUE_MAX} bytes.")
    if len(value) < VALUE_MIN:
        raise ValidationError(f"A secret's value has at least {VALUE_MIN} characters: a shorter one could not "
                              "be told apart from ordinary text when runs are redacted.")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ValidationError("A secret's value must be valid Unicode text.")
    row = session.get(Secret, name)
    created = row is None
    if row is None:
        if session.query(Secret).count() >= MAX_SECRETS:
            raise ValidationError(f"A tenant may keep at most {MAX_SECRETS} secrets.")
        row = Secret(name=name)
        session.add(row)
    row.value, row.updated_at = keyring.encrypt(value), now
    session.flush()
    return row, created


def listing(session: Session) -> list[Secret]:
    return list(session.execute(select(Secret).order_by(Secret.name)).scalars())


def remove(session: Session, name: str) -> None:
    check_name(name)
    row = session.get(Secret, name)
    if row is None:
        raise NotFound("No secret with this name.")
    session.delete(row)
    session.flush()


def values(session: Session, keyring: Keyring) -> dict[str, str]:
    """Every secret of the tenant, decrypted (for one run: `secrets.get` and redaction)."""
    return {row.name: keyring.decrypt(row.value) for row in listing(session)}


def public(row: Secret) -> dict[str, object]:
    return {"name": row.name, "updated_at": row.updated_at}
