"""API tokens: `alm_<public id>_<secret>`, shown once, stored as a SHA-256 of the secret.

The secret has 256 bits of entropy, so a fast hash is enough (no dictionary
to attack); the public id finds the row without scanning.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

PREFIX = "alm_"
_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class NewToken:
    public_id: str
    secret_hash: str
    plaintext: str


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mint() -> NewToken:
    public_id = "".join(secrets.choice(_ALPHABET) for _ in range(12))
    secret = secrets.token_urlsafe(32)
    return NewToken(public_id, hash_secret(secret), f"{PREFIX}{public_id}_{secret}")


def split(plaintext: str) -> tuple[str, str] | None:
    """(public_id, secret) of a well-formed token, else None."""
    if not plaintext.startswith(PREFIX) or len(plaintext) > 200:
        return None
    public_id, sep, secret = plaintext[len(PREFIX):].partition("_")
    if not sep or len(public_id) != 12 or not secret:
        return None
    return public_id, secret


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)
