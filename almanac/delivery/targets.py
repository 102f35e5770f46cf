"""Delivery targets of a tenant: validation, creation and change, and topic matching.

Topic patterns: `*` matches every topic; `order.*` matches `order.created` and
`order.line.added` (anything below `order.`); any other pattern matches that topic exactly.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.delivery import signing, templates
from almanac.egress import netguard
from almanac.vault.keyring import Keyring
from almanac.delivery.models import EMAIL, KINDS, NAME_MAX, WEBHOOK, Target
from almanac.errors import NotFound, ValidationError

TOPICS_MAX = 50
RECIPIENTS_MAX = 20
_PATTERN = re.compile(r"^(\*|[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*(\.\*)?)$")
_EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")


def matches(patterns: list[str], topic: str) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern == topic:
            return True
        if pattern.endswith(".*") and topic.startswith(pattern[:-1]):
            return True
    return False


def check_topics(topics: list[str]) -> list[str]:
    if not topics or len(topics) > TOPICS_MAX:
        raise ValidationError(f"A target needs 1-{TOPICS_MAX} topic patterns (\"*\" for all).")
    for topic in topics:
        if len(topic) > 200 or not _PATTERN.match(topic):
            raise ValidationError(f"{topic[:80]!r} is not a topic pattern: use a topic, a prefix like \"order.*\", or \"*\".",
                                  details={"field": "topics"})
    return sorted(set(topics))


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX:
        raise ValidationError(f"A target needs a name of 1-{NAME_MAX} characters.", details={"field": "name"})
    return name


def check_recipients(recipients: list[str]) -> list[str]:
    if not recipients or len(recipients) > RECIPIENTS_MAX:
        raise ValidationError(f"An e-mail target needs 1-{RECIPIENTS_MAX} recipients.")
    for address in recipients:
        if len(address) > 254 or not _EMAIL.match(address):
            raise ValidationError(f"{address[:80]!r} is not an e-mail address.", details={"field": "recipients"})
    return list(dict.fromkeys(recipients))


def _apply(row: Target, fields: dict[str, Any], *, allow_private: bool) -> None:
    """Validate and copy the given fields onto the row; the kind decides which fields are allowed."""
    webhook_only, email_only = {"url"}, {"recipients", "subject_template", "body_template"}
    wrong = set(fields) & (email_only if row.kind == WEBHOOK else webhook_only)
    if wrong:
        raise ValidationError(f"A {row.kind} target has no {', '.join(sorted(wrong))}.")
    if "name" in fields:
        row.name = check_name(fields["name"])
    if "enabled" in fields:
        row.enabled = bool(fields["enabled"])
    if "topics" in fields:
        row.topics = json.dumps(check_topics(fields["topics"]))
    if "url" in fields:
        row.url = netguard.check_url(fields["url"], allow_private=allow_private)
    if "recipients" in fields:
        row.recipients = json.dumps(check_recipients(fields["recipients"]))
    if "subject_template" in fields or "body_template" in fields:
        subject = fields.get("subject_template", row.subject_template) or templates.DEFAULT_SUBJECT
        body = fields.get("body_template", row.body_template) or templates.DEFAULT_BODY
        templates.check(subject, body)
        row.subject_template, row.body_template = subject, body


def create(session: Session, fields: dict[str, Any], *, now: datetime, allow_private: bool,
           keyring: Keyring) -> tuple[Target, str | None]:
    """A new target; for a webhook also its signing secret, which is shown only now."""
    kind = fields.pop("kind")
    if kind not in KINDS:
        raise ValidationError("A target's kind is webhook or email.")
    required = ("url",) if kind == WEBHOOK else ("recipients",)
    if any(fields.get(name) is None for name in required + ("topics",)):
        raise ValidationError(f"A {kind} target needs {', '.join(required)} and topics.")
    row = Target(kind=kind, enabled=True, created_at=now, updated_at=now)
    if kind == EMAIL:
        fields.setdefault("subject_template", None)
    _apply(row, {k: v for k, v in fields.items() if v is not None}, allow_private=allow_private)
    secret = signing.new_secret() if kind == WEBHOOK else None
    row.secret = None if secret is None else keyring.encrypt(secret)
    session.add(row)
    session.flush()
    return row, secret


def get(session: Session, target_id: int) -> Target:
    row = session.get(Target, target_id)
    if row is None:
        raise NotFound(f"There is no target {target_id}.")
    return row


def update(session: Session, target_id: int, fields: dict[str, Any], *, now: datetime, allow_private: bool) -> Target:
    row = get(session, target_id)
    _apply(row, fields, allow_private=allow_private)
    row.updated_at = now
    session.flush()
    return row


def rotate_secret(session: Session, target_id: int, *, now: datetime, keyring: Keyring) -> tuple[Target, str]:
    row = get(session, target_id)
    if row.kind != WEBHOOK:
        raise ValidationError("Only webhook targets have a signing secret.")
    secret = signing.new_secret()
    row.secret, row.updated_at = keyring.encrypt(secret), now
    session.flush()
    return row, secret


def delete(session: Session, target_id: int) -> None:
    """Removes the target with its deliveries and their attempts (foreign keys cascade)."""
    session.delete(get(session, target_id))
    session.flush()


def listing(session: Session) -> list[Target]:
    return list(session.scalars(select(Target).order_by(Target.id)))


def public(row: Target) -> dict[str, Any]:
    """What the API shows of a target: everything but the secret."""
    out: dict[str, Any] = dict(id=row.id, kind=row.kind, name=row.name, topics=json.loads(row.topics),
                               enabled=row.enabled, created_at=row.created_at, updated_at=row.updated_at)
    if row.kind == WEBHOOK:
        out["url"] = row.url
    else:
        out.update(recipients=json.loads(row.recipients or "[]"), subject_template=row.subject_template,
                   body_template=row.body_template)
    return out
