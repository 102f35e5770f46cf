"""Password hashing with argon2id (argon2-cffi's defaults follow RFC 9106)."""

from __future__ import annotations

import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from almanac.errors import ValidationError

_hasher = PasswordHasher()
MIN_LENGTH = 10
MAX_LENGTH = 256


def check_password(password: str) -> None:
    """Refuse a password that may not be set, without the cost of hashing it."""
    if not (MIN_LENGTH <= len(password) <= MAX_LENGTH):
        raise ValidationError(f"A password must be {MIN_LENGTH} to {MAX_LENGTH} characters long.")


def hash_password(password: str) -> str:
    check_password(password)
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    if len(password) > MAX_LENGTH:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def generate_password() -> str:
    """A readable random password for first accounts (about 120 bits)."""
    return secrets.token_urlsafe(15)


# A hash to verify against when the email is unknown, so timing does not reveal which emails exist.
DUMMY_HASH = _hasher.hash("not-a-real-password-0000")
