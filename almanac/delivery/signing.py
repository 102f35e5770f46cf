"""Webhook signatures, in the Standard Webhooks scheme (standardwebhooks.com), so receivers can
use its libraries or the ten-line recipe of the guide (docs/guide/delivery.md).

- `webhook-id`: the event's stable id (the same on every retry: deduplicate on it).
- `webhook-timestamp`: integer Unix seconds when this attempt was sent.
- `webhook-signature`: `v1,<base64 HMAC-SHA256>` over `"<id>.<timestamp>.<raw body>"`, keyed
  with the base64-decoded part of the target's secret after `whsec_`.

The timestamp is inside the signed content, so a receiver that refuses timestamps older than a
few minutes refuses replays of a captured request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
TOLERANCE_S = 300


def new_secret() -> str:
    """A fresh signing secret, shown to the admin once."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a signing secret starts with whsec_")
    return base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for one request."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, msg_id, timestamp, body),
    }


def verify(secret: str, got_headers: dict[str, str], body: bytes, *, now: int, tolerance: int = TOLERANCE_S) -> bool:
    """The receiver's side (used by our tests; the guide's recipe is the same logic)."""
    lower = {k.lower(): v for k, v in got_headers.items()}
    msg_id, stamp, sigs = lower.get("webhook-id"), lower.get("webhook-timestamp"), lower.get("webhook-signature")
    if not (msg_id and stamp and sigs) or not stamp.isdigit() or abs(now - int(stamp)) > tolerance:
        return False
    expected = signature(secret, msg_id, int(stamp), body)
    return any(hmac.compare_digest(expected, candidate) for candidate in sigs.split())
