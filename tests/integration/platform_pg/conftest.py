"""Scale-out pieces that exist only on PostgreSQL: these tests run on the throwaway server alone."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.postgres


@pytest.fixture
def backend() -> str:
    return "postgresql"
