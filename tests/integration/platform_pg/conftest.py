"""Scale-out pieces that exist only on PostgreSQL: these tests run on the throwaway server alone."""

from __future__ import annotations

import pytest

from almanac.settings import Settings

pytestmark = pytest.mark.postgres


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """One lane (no lane connections): these tests read the statements and transactions of a claim
    pass and of a record on `database.engine`; a lane's pass makes the same ones on its own
    connection. Lanes themselves: test_lanes.py."""
    return settings.model_copy(update={"pg_lanes": 1})
