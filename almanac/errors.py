"""Errors of the whole product, each with the code and HTTP status of SPEC section 4.

The core raises these; `almanac.web.errors` turns them into the
`{"error": {"code", "message", "details"?}}` envelope in one place.
"""

from __future__ import annotations

from typing import Any


class AlmanacError(Exception):
    """Base of every error a person or program may see."""

    code: str = "internal_error"
    status: int = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRule(AlmanacError):
    code, status = "invalid_rule", 422


class NeverFires(AlmanacError):
    code, status = "never_fires", 422


class TooFrequent(AlmanacError):
    code, status = "too_frequent", 422


class ScriptSyntaxError(AlmanacError):
    code, status = "script_syntax_error", 422


class NotFound(AlmanacError):
    code, status = "not_found", 404


class Unauthorized(AlmanacError):
    code, status = "unauthorized", 401


class Forbidden(AlmanacError):
    code, status = "forbidden", 403


class ValidationError(AlmanacError):
    code, status = "validation_error", 422


class Conflict(AlmanacError):
    code, status = "conflict", 409


class QuotaExceeded(AlmanacError):
    code, status = "quota_exceeded", 429


class RateLimited(AlmanacError):
    code, status = "rate_limited", 429


class HolidaysUnknown(ValidationError):
    """A day in a year the holiday library does not cover for the calendar's country:
    never answered as if the year had no holidays."""
