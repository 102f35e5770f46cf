"""Shared helpers for the recurrence tests."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)


@pytest.fixture
def now() -> datetime:
    return NOW


def iso(values: list[datetime]) -> list[str]:
    return [v.isoformat() for v in values]
